package populate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

const (
	// DefaultEndpoint is the public HuggingFace hub, used when no endpoint is given.
	DefaultEndpoint = "https://huggingface.co"
	// DefaultRevision is the revision downloaded when none is given.
	DefaultRevision = "main"
	// EnvEndpoint names the variable that overrides the hub endpoint.
	EnvEndpoint = "HF_ENDPOINT"
	// EnvToken names the variable that holds the hub token.
	EnvToken = "HF_TOKEN"
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
	// Client sends the requests; by default one that follows redirects and
	// times out on a hub that does not answer.
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
	// is retried; DefaultIdleTimeout if zero.
	IdleTimeout time.Duration
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
	cache           cacheRepo
	hub             hub
	sleep           func(context.Context, time.Duration) error
	idle            time.Duration
	log             *slog.Logger
	downloaded      int64
}

// Run makes the cache directory hold a verified snapshot of the model at the
// revision, downloading only what is missing or damaged, and returns what the
// snapshot holds. See the package documentation for the layout and for when
// the cache is used without the hub.
func Run(ctx context.Context, opts Options) (*Result, error) {
	p, err := newPopulator(opts)
	if err != nil {
		return nil, err
	}
	if isCommit(p.revision) {
		result, err := p.fromCache(ctx, p.revision)
		if err == nil {
			p.log.Info("snapshot verified from the cache", "model", p.model, "commit", p.revision)
			return result, nil
		}
		if !errors.Is(err, errNoSnapshot) {
			p.log.Warn("the cached snapshot is unusable; asking the hub", "error", err.Error())
		}
	}
	info, err := p.hub.resolve(ctx, p.model, p.revision)
	if err != nil {
		if !isTransient(err) {
			return nil, err
		}
		return p.offline(ctx, err)
	}
	return p.download(ctx, info)
}

func newPopulator(opts Options) (*populator, error) {
	if opts.Revision == "" {
		opts.Revision = DefaultRevision
	}
	if err := validModel(opts.Model); err != nil {
		return nil, err
	}
	if err := validRevision(opts.Revision); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w options: no cache directory", ErrInvalid)
	}
	endpoint, err := normalEndpoint(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	if opts.Client == nil {
		opts.Client = defaultClient()
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
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &populator{
		model:    opts.Model,
		revision: opts.Revision,
		cache:    newCacheRepo(opts.Dir, opts.Model),
		hub: hub{
			endpoint: endpoint,
			token:    opts.Token,
			client:   opts.Client,
			retry:    retrier{maxAttempts: opts.MaxAttempts, backoff: opts.Backoff, sleep: opts.Sleep, log: opts.Log},
		},
		sleep: opts.Sleep,
		idle:  opts.IdleTimeout,
		log:   opts.Log,
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

// defaultClient follows redirects (the hub sends LFS files from a CDN) and
// gives up on a hub that accepts a connection but never answers.
func defaultClient() *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = DefaultIdleTimeout
	return &http.Client{Transport: transport}
}

// download brings every file of the resolved commit into the cache, then
// records the revision and the manifest that marks the snapshot complete.
func (p *populator) download(ctx context.Context, info *revisionInfo) (*Result, error) {
	commit := info.SHA
	if !isCommit(commit) {
		return nil, fmt.Errorf("%w answer: the hub resolved %q to %q, not a commit id", ErrInvalid, p.revision, commit)
	}
	files, err := planFiles(info.Siblings)
	if err != nil {
		return nil, fmt.Errorf("model %q at %s: %w", p.model, commit, err)
	}
	p.log.Info("resolved revision", "model", p.model, "revision", p.revision, "commit", commit, "files", len(files), "bytes", totalSize(files))
	records := make([]fileRecord, 0, len(files))
	for _, f := range files {
		record, err := p.ensureBlob(ctx, commit, f)
		if err != nil {
			return nil, err
		}
		if err := p.cache.link(commit, record); err != nil {
			return nil, err
		}
		records = append(records, record)
	}
	// TEI's hf-hub crate reads refs/<revision> even when the revision is a
	// commit, and downloads everything again without it: write it always.
	if err := p.cache.writeRef(p.revision, commit); err != nil {
		return nil, err
	}
	m := manifest{Version: manifestVersion, Model: p.model, Commit: commit, ContentDigest: digestOf(records), Files: records}
	if err := p.cache.writeManifest(m); err != nil {
		return nil, err
	}
	result := resultOf(commit, records)
	p.log.Info("populated the cache", "model", p.model, "commit", commit, "contentDigest", result.ContentDigest,
		"files", result.Files, "bytes", result.Bytes, "downloadedBytes", p.downloaded)
	return result, nil
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
	if err != nil {
		return nil, fmt.Errorf("%w; and the cache cannot stand in: %w", hubErr, err)
	}
	p.log.Info("snapshot verified from the cache", "model", p.model, "revision", p.revision, "commit", commit)
	return result, nil
}

// fromCache verifies a commit's snapshot against its manifest: every link in
// place and every blob of the recorded size and sha256.
func (p *populator) fromCache(ctx context.Context, commit string) (*Result, error) {
	m, ok, err := p.cache.readManifest(commit)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("commit %s: %w", commit, errNoSnapshot)
	}
	for _, f := range m.Files {
		link := p.cache.snapshotPath(commit, f.Name)
		if target, err := os.Readlink(link); err != nil || target != linkTarget(f.Name, f.Blob) {
			return nil, fmt.Errorf("%w: %s does not link to blob %s", ErrCorrupt, link, f.Blob)
		}
		if _, err := p.verifyBlob(ctx, f.Name, p.cache.blobPath(f.Blob), expectation{size: f.Size, sha256: f.SHA256}); err != nil {
			return nil, err
		}
	}
	if digest := digestOf(m.Files); digest != m.ContentDigest {
		return nil, fmt.Errorf("%w: %s records content digest %s, its files give %s", ErrCorrupt, p.cache.manifestPath(commit), m.ContentDigest, digest)
	}
	return resultOf(commit, m.Files), nil
}

func resultOf(commit string, records []fileRecord) *Result {
	result := &Result{ResolvedCommit: commit, ContentDigest: digestOf(records), Files: len(records)}
	for _, r := range records {
		result.Bytes += r.Size
	}
	return result
}
