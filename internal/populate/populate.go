package populate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
)

const (
	// DefaultEndpoint is the public HuggingFace hub, used when no endpoint is given.
	DefaultEndpoint = "https://huggingface.co"
	// DefaultRevision is the revision downloaded when none is given.
	DefaultRevision = "main"
	// DefaultIdleTimeout is how long a download may receive nothing before it is retried.
	DefaultIdleTimeout = 2 * time.Minute
)

// errNoSnapshot says the cache holds no complete snapshot of a commit.
var errNoSnapshot = errors.New("the cache holds no complete snapshot")

// Options say what to download, from where, and into which cache directory.
// Only Model and Dir are required.
type Options struct {
	// Model is the hub repository id, "org/name" or "name".
	Model string
	// Revision is a branch, a tag or a commit id; DefaultRevision if empty.
	Revision string
	// Dir is the cache directory (HUGGINGFACE_HUB_CACHE).
	Dir string
	// Endpoint is the hub's base URL; DefaultEndpoint if empty.
	Endpoint string
	// Token is sent as a bearer token when not empty. It is never logged.
	Token string
	// Client sends the requests; by default one that follows redirects,
	// times out on a hub that does not answer, and takes its proxy and
	// certificate authorities from the process environment as TEI does
	// (see the package documentation, Network).
	Client *http.Client
	// MaxAttempts bounds the attempts of each request that fails transiently;
	// DefaultMaxAttempts if zero.
	MaxAttempts int
	// Backoff returns the wait before retry n (from 0); by default
	// ExponentialBackoff(1s, 30s).
	Backoff func(retry int) time.Duration
	// Sleep waits between attempts and while another populator holds a blob's
	// lock; SleepContext by default. Tests pass one that does not sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// IdleTimeout ends a download that receives nothing for that long, so it
	// is retried; the default client also waits that long at most for the
	// hub's answer to begin. DefaultIdleTimeout if zero.
	IdleTimeout time.Duration
	// MetadataTimeout bounds each HEAD request that asks the hub for a
	// file's metadata (a hub mirror's listing gives names only); a request
	// that times out is retried. Zero leaves only the client's own timeouts.
	MetadataTimeout time.Duration
	// Image is the TEI image that reads the cache: only the files it reads
	// are downloaded (see BackendsOf). Empty means every file of the commit.
	Image string
	// AllBackends caches what any TEI backend reads, whatever Image says,
	// for a cache that servers running different images share.
	AllBackends bool
	// Parallel is how many files are downloaded at once;
	// DefaultParallelDownloads if zero.
	Parallel int
	// Verify says how a snapshot the cache already holds is checked;
	// VerifySizes if empty.
	Verify Verify
	// Filler names the run's pod (its hostname). A run with a Filler
	// records it in the cache once it is complete, and a run that finds
	// another filler recorded treats the cache as a copy of another
	// replica's claim: it checks every file's content (VerifyFull) and
	// reports Result.CopiedFrom. Empty records and checks nothing.
	Filler string
	// Prune deletes, before a new commit is downloaded, every snapshot a
	// manifest marks complete but the new one and the one the last run left
	// (see the package documentation, Pruning), holding the model's folder
	// alone while it runs. Off by default: deletion only when asked.
	Prune bool
	// Log receives progress; discarded if nil.
	Log *slog.Logger
}

// Result is what a populated cache holds.
type Result struct {
	// ResolvedCommit is the commit the revision resolved to.
	ResolvedCommit string `json:"resolvedCommit"`
	// ContentDigest is the content digest of the snapshot's files.
	ContentDigest string `json:"contentDigest"`
	// Files is the number of files in the snapshot.
	Files int `json:"files"`
	// Bytes is the total size of the snapshot's files.
	Bytes int64 `json:"bytes"`
	// Names are the snapshot's files, sorted; dropped where a termination
	// message has no room for them.
	Names []string `json:"names,omitempty"`
	// RepositoryBytes is the total size of every file of the commit, 0 when
	// the hub listed files without their sizes.
	RepositoryBytes int64 `json:"repositoryBytes,omitempty"`
	// FreeBytes is what the cache's filesystem had available when the run
	// ended (statfs); nil without Prune or when unknown.
	FreeBytes *int64 `json:"freeBytes,omitempty"`
	// ReclaimableBytes is what a pruning run for the next commit frees: the
	// blobs only snapshots older than this one name. Nil without Prune.
	ReclaimableBytes *int64 `json:"reclaimableBytes,omitempty"`
	// CopiedFrom is the filler of the copy this run checked (see
	// Options.Filler), "" when the cache was not copied.
	CopiedFrom string `json:"copiedFrom,omitempty"`
}

// contentDigestPattern is the form ContentDigest returns.
var contentDigestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Recordable reports whether r is what a binding records as realized: a
// full commit id and, when set, a content digest in ContentDigest's form.
// A result read back from a termination message is checked with it.
func (r Result) Recordable() bool {
	return isCommit(r.ResolvedCommit) && (r.ContentDigest == "" || contentDigestPattern.MatchString(r.ContentDigest))
}

// populator carries one run's settings.
type populator struct {
	model, revision string
	parallel        int
	cache           cacheRepo
	hub             hub
	sleep           func(context.Context, time.Duration) error
	idle            time.Duration
	verify          Verify
	prune           bool
	// filler is Options.Filler; copied the filler of the copy found.
	filler, copied string
	log            *slog.Logger
	downloaded     atomic.Int64
	// backends and selection say which files are cached: selection names
	// them in the manifest ("all", or "tei:" and the backends).
	backends  []Backend
	selection string
	// leave releases the model folder's lock once enterFolder took it;
	// alone says the run holds the folder alone, so it may prune.
	leave func()
	alone bool
}

// selectAll is the selection of a run without an image.
const selectAll = "all"

// selectAny is the selection of a run that caches what any TEI backend
// reads: for an image whose backends are unknown, or for every image.
const selectAny = "tei:any"

// selectionOf names the files a run caches for image, or for any image
// when all is set.
func selectionOf(image string, all bool) ([]Backend, string) {
	switch {
	case all:
		return nil, selectAny
	case image == "":
		return nil, selectAll
	}
	backends, ok := BackendsOf(image)
	if !ok {
		return nil, selectAny
	}
	names := make([]string, 0, len(backends))
	for _, b := range backends {
		names = append(names, string(b))
	}
	return backends, "tei:" + strings.Join(names, ",")
}

// Run makes the cache directory hold a verified snapshot of the model at the
// revision, downloading only what is missing or damaged, and returns what the
// snapshot holds. See the package documentation for the layout, for how a
// complete snapshot is checked, and for when the cache is used without the
// hub.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w options: no cache directory", ErrInvalid)
	}
	p, err := newPopulator(opts)
	if err != nil {
		return nil, err
	}
	defer p.leaveFolder()
	if p.cache.folderExists() {
		if err := p.enterFolder(ctx); err != nil {
			return nil, err
		}
	}
	p.trustNoCopy()
	result, err := p.run(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.finish(result); err != nil {
		return nil, err
	}
	if err := p.recordFiller(); err != nil {
		return nil, err
	}
	result.CopiedFrom = p.copied
	return result, nil
}

// run makes the cache hold the snapshot: from the cache, from the hub, or
// from the cache when the hub cannot be reached.
func (p *populator) run(ctx context.Context) (*Result, error) {
	if isCommit(p.revision) {
		if result, ok := p.cached(ctx, p.revision, "asking the hub"); ok {
			return result, nil
		}
	}
	info, err := p.hub.resolve(ctx, p.model, p.revision)
	if err != nil {
		if !isTransient(err) {
			return nil, err
		}
		return p.offline(ctx, err)
	}
	// A commit revision was checked above; a branch's commit is checked
	// here, by size, before any file is read. A full check is download's.
	if !isCommit(p.revision) && p.verify == VerifySizes && isCommit(info.SHA) {
		if result, ok := p.cached(ctx, info.SHA, "checking every file"); ok {
			return result, nil
		}
	}
	return p.download(ctx, info)
}

// validModelAndRevision checks opts' model and revision, defaulting the
// revision to DefaultRevision.
func validModelAndRevision(opts *Options) error {
	if opts.Revision == "" {
		opts.Revision = DefaultRevision
	}
	if err := validModel(opts.Model); err != nil {
		return err
	}
	return validRevision(opts.Revision)
}

func newPopulator(opts Options) (*populator, error) {
	if err := validModelAndRevision(&opts); err != nil {
		return nil, err
	}
	if opts.Verify == "" {
		opts.Verify = VerifySizes
	}
	if _, err := ParseVerify(string(opts.Verify)); err != nil {
		return nil, err
	}
	endpoint, err := normalEndpoint(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.Backoff == nil {
		opts.Backoff = ExponentialBackoff(defaultBackoffBase, defaultBackoffCap)
	}
	if opts.Sleep == nil {
		opts.Sleep = SleepContext
	}
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallelDownloads
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.Client == nil {
		opts.Client = defaultClient(opts.IdleTimeout)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	backends, selection := selectionOf(opts.Image, opts.AllBackends)
	return &populator{
		backends:  backends,
		selection: selection,
		model:     opts.Model,
		revision:  opts.Revision,
		parallel:  opts.Parallel,
		cache:     newCacheRepo(opts.Dir, opts.Model),
		hub: hub{
			endpoint:        endpoint,
			token:           opts.Token,
			client:          opts.Client,
			metadataTimeout: max(opts.MetadataTimeout, 0),
			retry:           retrier{maxAttempts: opts.MaxAttempts, backoff: opts.Backoff, sleep: opts.Sleep, log: opts.Log},
		},
		sleep:  opts.Sleep,
		idle:   opts.IdleTimeout,
		verify: opts.Verify,
		prune:  opts.Prune,
		filler: opts.Filler,
		log:    opts.Log,
	}, nil
}

// normalEndpoint checks the hub's base URL and drops a trailing slash.
func normalEndpoint(endpoint string) (string, error) {
	if endpoint == "" {
		return DefaultEndpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("%w hub endpoint %q: want an http or https base URL", ErrInvalid, endpoint)
	}
	return strings.TrimRight(endpoint, "/"), nil
}

// defaultClient follows redirects (the hub sends LFS files from a CDN),
// gives up on a hub that accepts a connection but does not answer within
// headerTimeout, and takes its network settings from the process
// environment, as TEI's HTTP client does: the proxy from HTTP_PROXY,
// HTTPS_PROXY and NO_PROXY or their lowercase forms
// (http.ProxyFromEnvironment), and the certificate authorities from the
// system roots, which on Linux are read from SSL_CERT_FILE and SSL_CERT_DIR
// when they are set (crypto/x509/root_unix.go). Both are read once per
// process.
func defaultClient(headerTimeout time.Duration) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = http.ProxyFromEnvironment
	transport.TLSClientConfig = nil // the system roots
	transport.ResponseHeaderTimeout = headerTimeout
	return &http.Client{Transport: transport}
}

// download brings the files TEI reads of the resolved commit into the
// cache, then records the revision, the commit, and the manifest that marks
// the snapshot complete.
func (p *populator) download(ctx context.Context, info *revisionInfo) (*Result, error) {
	commit := info.SHA
	if !isCommit(commit) {
		return nil, fmt.Errorf("%w answer: the hub resolved %q to %q, not a commit id", ErrInvalid, p.revision, commit)
	}
	listing, err := planFiles(info.Siblings)
	if err != nil {
		return nil, fmt.Errorf("model %q at %s: %w", p.model, commit, err)
	}
	if err := p.enterFolder(ctx); err != nil {
		return nil, err
	}
	if err := p.pruneAllBut(commit, listing); err != nil {
		return nil, err
	}
	snap := newSnapshot(p, commit, listing)
	names, err := p.wanted(listing, func(name string) ([]byte, error) { return snap.read(ctx, name) })
	if err != nil {
		return nil, fmt.Errorf("model %q at %s: %w", p.model, commit, err)
	}
	p.log.Info("resolved revision", "model", p.model, "revision", p.revision, "commit", commit,
		"files", len(names), "listedFiles", len(listing), "listedBytes", listedSize(listing), "selection", p.selection)
	records, err := snap.ensureAll(ctx, names)
	if err != nil {
		return nil, err
	}
	if err := p.writeRefs(commit); err != nil {
		return nil, err
	}
	m := manifest{
		Version: manifestVersion, Model: p.model, Commit: commit, Selection: p.selection,
		RepositoryBytes: listedSize(listing), ContentDigest: digestOf(records), Files: records,
	}
	if err := p.cache.writeManifest(m); err != nil {
		return nil, err
	}
	result := resultOf(m)
	p.log.Info("populated the cache", "model", p.model, "commit", commit, "contentDigest", result.ContentDigest,
		"files", result.Files, "bytes", result.Bytes, "repositoryBytes", result.RepositoryBytes, "downloadedBytes", p.downloaded.Load())
	return result, nil
}

// writeRefs records the commit as the ref of the revision asked for and of
// the commit itself. TEI's hf-hub looks a file up through refs/<revision>
// only (hf-hub src/lib.rs, CacheRepo::get), also when the revision is a
// commit, so TEI finds the snapshot started on either.
func (p *populator) writeRefs(commit string) error {
	for _, ref := range []string{p.revision, commit} {
		if err := p.cache.writeRef(ref, commit); err != nil {
			return err
		}
	}
	return nil
}

// wanted names the listed files to cache: every one without an image, else
// those TEI reads with the image's backends.
func (p *populator) wanted(listing []remoteFile, read reader) ([]string, error) {
	names := make([]string, 0, len(listing))
	for _, f := range listing {
		names = append(names, f.name)
	}
	if p.selection == selectAll {
		return names, nil
	}
	return teiReads(names, p.backends, read)
}

// offline answers from the cache when the hub cannot be reached.
func (p *populator) offline(ctx context.Context, hubErr error) (*Result, error) {
	p.log.Warn("the hub is unreachable; using the cache", "error", hubErr.Error())
	commit := p.revision
	if !isCommit(commit) {
		ref, err := p.cache.readRef(p.revision)
		if err != nil {
			return nil, fmt.Errorf("%w; and the cache cannot stand in: %w", hubErr, err)
		}
		if ref == "" {
			return nil, fmt.Errorf("%w; and the cache cannot stand in: it records no commit for revision %q", hubErr, p.revision)
		}
		commit = ref
	}
	result, err := p.fromCache(ctx, commit)
	if err == nil {
		err = p.writeRefs(commit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w; and the cache cannot stand in: %w", hubErr, err)
	}
	p.log.Info("snapshot checked in the cache", "model", p.model, "revision", p.revision, "commit", commit,
		"verify", string(p.verify), "files", result.Files, "bytes", result.Bytes)
	return result, nil
}
