// Package hubtest serves a stand-in for the HuggingFace hub on loopback, for
// tests of package populate and of the commands that use it. The hub's server
// is not open source; each rule follows what the clients TEI and embedops
// follow read from it (hf-hub src/api/tokio.rs, huggingface_hub
// src/huggingface_hub/file_download.py and hf_api.py):
//
//   - GET /api/models/{org}/{name}/revision/{rev}[?blobs=true] lists a
//     commit's files ("sha", "siblings"); with blobs=true each sibling carries
//     "size" and "blobId", and LFS files "lfs": {"sha256", "size", "pointerSize"}
//     (huggingface_hub hf_api.py, RepoSibling and BlobLfsInfo). A mirror
//     (ListNamesOnly) lists "rfilename" only, as hf-hub's RepoInfo reads it.
//   - GET /api/models/{org}/{name} answers whether a model exists.
//   - GET and HEAD /{org}/{name}/resolve/{rev}/{file} serve a file: regular
//     files directly with their git blob id as ETag, LFS files by a 302
//     redirect to a CDN path, with X-Linked-Etag (the sha256) and
//     X-Linked-Size; both carry X-Repo-Commit (hf-hub ApiRepo::metadata and
//     huggingface_hub get_hf_file_metadata read these headers). Range
//     requests are honoured, "bytes=0-0" included (hf-hub's metadata probe).
//   - Errors carry X-Error-Code (RepoNotFound, RevisionNotFound,
//     EntryNotFound, GatedRepo) and a JSON {"error": ...} body
//     (huggingface_hub utils/_http.py, hf_raise_for_status). An unknown
//     model is a 401 to an anonymous request and a 404 to one with a token, as
//     on the public hub, which hides whether private models exist.
//
// Only "org/name" model ids are served. Faults (failures, stalls, corrupted or
// cut-off bodies, stripped ETags, raw listings) are injected per path prefix
// or per file name. NewTLS serves the same hub over HTTPS, with a
// certificate from a certificate authority of its own.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/embedops/embedops/test/testca"
)

// File is one file of a stand-in model repository.
type File struct {
	// Name is the path in the repository, "/"-separated.
	Name string
	// Data is the file's content.
	Data []byte
	// LFS stores the file with git LFS: listed with its sha256 and served
	// through a redirect.
	LFS bool
	// sums are Data's digests, computed once by AddCommit as the hub
	// stores them, so serving a large file never hashes it again.
	sums *sums
}

// sums are a file's digests.
type sums struct {
	sha256, blobID string
}

// digests returns f's sums, computing them when AddCommit did not.
func (f File) digests() sums {
	if f.sums != nil {
		return *f.sums
	}
	return sums{sha256: SHA256(f.Data), blobID: BlobID(f.Data)}
}

// Request is a request the hub received.
type Request struct {
	Method        string
	Path          string
	Query         string
	Range         string
	Authorization string
}

// Hub is a stand-in HuggingFace hub on loopback. Its methods are safe to call
// while it serves.
type Hub struct {
	// URL is the hub's base URL, for HF_ENDPOINT.
	URL string
	// CA is, for a hub started with NewTLS, the PEM certificate of the
	// authority that signed its certificate: a CA bundle for SSL_CERT_FILE.
	CA []byte

	server *httptest.Server
	cdnURL string
	done   chan struct{}
	closed sync.Once

	mu             sync.Mutex
	models         map[string]*model
	blobs          map[string][]byte // LFS content by sha256, for the CDN path
	token          string
	omitErrorCodes bool
	namesOnly      bool
	stripETags     bool
	retryAfter     string
	listings       map[string][]map[string]any
	requests       []Request
	failures       []failure
	stalls         []failure
	corrupt        map[string]bool
	truncate       map[string]int
}

// model is one repository: its commits and the branches that name them.
type model struct {
	commits  map[string][]File
	branches map[string]string
	gated    bool
}

// failure answers the next times requests under a path prefix with status.
type failure struct {
	prefix string
	status int
	times  int
}

// New starts a hub with no models; it stops when the test ends.
func New(t testing.TB) *Hub {
	h := newHub()
	h.server = httptest.NewServer(h)
	h.start(t)
	return h
}

// NewTLS starts a hub with no models that serves HTTPS only, with a
// certificate for 127.0.0.1, localhost (its CDN's host) and names (under
// which a test's proxy serves it), signed by an authority made for it,
// whose certificate is h.CA; it stops when the test ends.
func NewTLS(t testing.TB, names ...string) *Hub {
	h := newHub()
	ca, err := testca.New("hubtest CA")
	if err != nil {
		t.Fatalf("making the hub's authority: %v", err)
	}
	leaf, err := ca.KeyPair("hubtest", append([]string{"localhost"}, names...)...)
	if err != nil {
		t.Fatalf("making the hub's certificate: %v", err)
	}
	h.CA = ca.PEM
	h.server = httptest.NewUnstartedServer(h)
	h.server.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12}
	// A client that does not trust the authority is what tests look for.
	h.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	h.server.StartTLS()
	h.start(t)
	return h
}

// NewHandler returns a hub with no models that serves no address of its
// own: it is an http.Handler for a program to serve, such as the hub
// stand-in image. Its URL is empty, and it sends LFS files by a redirect to
// the scheme and host the request came to, as no second host plays the CDN.
func NewHandler() *Hub {
	return newHub()
}

func newHub() *Hub {
	return &Hub{
		done:     make(chan struct{}),
		models:   map[string]*model{},
		blobs:    map[string][]byte{},
		corrupt:  map[string]bool{},
		truncate: map[string]int{},
		listings: map[string][]map[string]any{},
	}
}

// start records the started server's URL and stops it when the test ends.
func (h *Hub) start(t testing.TB) {
	h.URL = h.server.URL
	// The same server under another host name plays the CDN.
	h.cdnURL = strings.Replace(h.URL, "127.0.0.1", "localhost", 1)
	t.Cleanup(h.Close)
}

// Close stops the hub: stalled requests end and, for a hub New or NewTLS
// started, later requests fail to connect.
func (h *Hub) Close() {
	h.closed.Do(func() { close(h.done) })
	if h.server != nil {
		h.server.Close()
	}
}

// AddCommit adds a commit of files to a model (created if new), points branch
// at it, and returns its id.
func (h *Hub) AddCommit(modelID, branch string, files ...File) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.models[modelID]
	if m == nil {
		m = &model{commits: map[string][]File{}, branches: map[string]string{}}
		h.models[modelID] = m
	}
	id := sha1.New()
	fmt.Fprintf(id, "%s\x00%s\x00%d\x00", modelID, branch, len(m.commits))
	stored := slices.Clone(files)
	for i, f := range stored {
		stored[i].sums = &sums{sha256: SHA256(f.Data), blobID: BlobID(f.Data)}
		fmt.Fprintf(id, "%s\x00%t\x00%s\x00", f.Name, f.LFS, stored[i].sums.sha256)
		if f.LFS {
			h.blobs[stored[i].sums.sha256] = f.Data
		}
	}
	commit := hex.EncodeToString(id.Sum(nil))
	m.commits[commit] = stored
	m.branches[branch] = commit
	return commit
}

// RequireToken makes the hub refuse requests without "Bearer token".
func (h *Hub) RequireToken(token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.token = token
}

// Gate makes a model gated: its files and listing are refused with 403.
func (h *Hub) Gate(modelID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.models[modelID].gated = true
}

// OmitErrorCodes stops the hub from setting X-Error-Code, as some mirrors do.
func (h *Hub) OmitErrorCodes() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.omitErrorCodes = true
}

// ListNamesOnly makes the hub list files by name only, without size,
// blobId or lfs, as hub mirrors and some proxies do.
func (h *Hub) ListNamesOnly() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.namesOnly = true
}

// StripETags makes the hub send files without ETag and X-Linked-Etag, as a
// proxy that drops them does.
func (h *Hub) StripETags() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stripETags = true
}

// RetryAfter sets the Retry-After header of injected failures.
func (h *Hub) RetryAfter(value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.retryAfter = value
}

// SetListing makes the hub list siblings, as given, for a commit of a
// model instead of its files: a malformed listing for tests.
func (h *Hub) SetListing(modelID, commit string, siblings []map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listings[modelID+"@"+commit] = siblings
}

// FailNext answers the next times requests whose path starts with prefix
// with status.
func (h *Hub) FailNext(prefix string, status, times int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures = append(h.failures, failure{prefix: prefix, status: status, times: times})
}

// StallNext leaves the next times requests whose path starts with prefix
// unanswered until the client gives up on them or the hub closes.
func (h *Hub) StallNext(prefix string, times int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stalls = append(h.stalls, failure{prefix: prefix, times: times})
}

// Corrupt makes the hub serve the file named name with one byte flipped.
func (h *Hub) Corrupt(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.corrupt[name] = true
}

// CutNext makes the next request for the whole file named name announce the
// full length, send its first n bytes, and drop the connection.
func (h *Hub) CutNext(name string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.truncate[name] = n
}

// Requests returns the requests received so far.
func (h *Hub) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.requests...)
}

// SHA256 is the lowercase hex sha256 of data: an LFS file's ETag and blob name.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// BlobID is the git blob id of data: a regular file's ETag and blob name.
func BlobID(data []byte) string {
	id := sha1.New()
	fmt.Fprintf(id, "blob %d\x00", len(data))
	id.Write(data)
	return hex.EncodeToString(id.Sum(nil))
}

// ServeHTTP routes a request as the public hub does.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.record(r)
	if h.stalled(r) || h.injectedFailure(w, r) {
		return
	}
	segments, err := unescapedSegments(r.URL.EscapedPath())
	switch {
	case err != nil || (r.Method != http.MethodGet && r.Method != http.MethodHead):
		h.fail(w, http.StatusBadRequest, "", "bad request")
	case len(segments) >= 4 && segments[0] == "api" && segments[1] == "models":
		h.serveAPI(w, r, segments[2]+"/"+segments[3], segments[4:])
	case len(segments) >= 3 && segments[0] == "cdn-lfs":
		h.serveCDN(w, r, segments[1], strings.Join(segments[2:], "/"))
	case len(segments) >= 5 && segments[2] == "resolve":
		h.serveResolve(w, r, segments[0]+"/"+segments[1], segments[3], strings.Join(segments[4:], "/"))
	default:
		h.fail(w, http.StatusNotFound, "", "not found")
	}
}

func (h *Hub) record(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization"),
	})
}

// stalled holds a request StallNext queued a stall for, if one matches,
// until its client gives up or the hub closes, and reports whether it did.
func (h *Hub) stalled(r *http.Request) bool {
	h.mu.Lock()
	matched := false
	for i := range h.stalls {
		if s := &h.stalls[i]; s.times > 0 && strings.HasPrefix(r.URL.Path, s.prefix) {
			s.times--
			matched = true
			break
		}
	}
	h.mu.Unlock()
	if matched {
		select {
		case <-r.Context().Done():
		case <-h.done:
		}
	}
	return matched
}

// injectedFailure answers with a failure queued by FailNext, if one matches.
func (h *Hub) injectedFailure(w http.ResponseWriter, r *http.Request) bool {
	h.mu.Lock()
	status, retryAfter := 0, h.retryAfter
	for i := range h.failures {
		if f := &h.failures[i]; f.times > 0 && strings.HasPrefix(r.URL.Path, f.prefix) {
			f.times--
			status = f.status
			break
		}
	}
	h.mu.Unlock()
	if status == 0 {
		return false
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	h.fail(w, status, "", "injected failure")
	return true
}

// serveAPI answers the model info and revision info calls.
func (h *Hub) serveAPI(w http.ResponseWriter, r *http.Request, modelID string, rest []string) {
	m, ok := h.authorize(w, r, modelID)
	if !ok {
		return
	}
	switch {
	case len(rest) == 0:
		writeJSON(w, map[string]any{"id": modelID, "sha": m.branches["main"]})
	case len(rest) == 2 && rest[0] == "revision":
		commit, ok := m.resolve(rest[1])
		if !ok {
			h.fail(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rest[1])
			return
		}
		h.mu.Lock()
		blobs := r.URL.Query().Get("blobs") == "true" && !h.namesOnly
		siblings, raw := h.listings[modelID+"@"+commit]
		h.mu.Unlock()
		if !raw {
			siblings = make([]map[string]any, 0, len(m.commits[commit]))
			for _, f := range m.commits[commit] {
				siblings = append(siblings, sibling(f, blobs))
			}
		}
		writeJSON(w, map[string]any{"id": modelID, "modelId": modelID, "sha": commit, "private": false, "siblings": siblings})
	default:
		h.fail(w, http.StatusNotFound, "", "not found")
	}
}

// sibling lists one file; with blobs, its size, blob id and LFS metadata.
func sibling(f File, blobs bool) map[string]any {
	s := map[string]any{"rfilename": f.Name}
	if !blobs {
		return s
	}
	sums := f.digests()
	s["size"] = len(f.Data)
	s["blobId"] = sums.blobID
	if f.LFS {
		pointer := fmt.Sprintf("oid sha256:%s\nsize %d\n", sums.sha256, len(f.Data))
		s["blobId"] = BlobID([]byte(pointer))
		s["lfs"] = map[string]any{"sha256": sums.sha256, "size": len(f.Data), "pointerSize": len(pointer)}
	}
	return s
}

// serveResolve serves a file of a revision: directly, or by redirect for LFS.
func (h *Hub) serveResolve(w http.ResponseWriter, r *http.Request, modelID, revision, name string) {
	m, ok := h.authorize(w, r, modelID)
	if !ok {
		return
	}
	commit, ok := m.resolve(revision)
	if !ok {
		h.fail(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+revision)
		return
	}
	for _, f := range m.commits[commit] {
		if f.Name != name {
			continue
		}
		h.mu.Lock()
		strip := h.stripETags
		h.mu.Unlock()
		w.Header().Set("X-Repo-Commit", commit)
		if f.LFS {
			sum := f.digests().sha256
			if !strip {
				w.Header().Set("X-Linked-Etag", strconv.Quote(sum))
			}
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
			// The hub sends LFS files from a CDN on another host, by an
			// absolute URL: clients that follow relative redirects only
			// (huggingface_hub _httpx_follow_relative_redirects) stop here.
			http.Redirect(w, r, h.cdnBase(r)+"/cdn-lfs/"+sum+"/"+escapePath(name), http.StatusFound)
			return
		}
		if !strip {
			w.Header().Set("ETag", strconv.Quote(f.digests().blobID))
		}
		h.serveContent(w, r, name, f.Data)
		return
	}
	h.fail(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
}

// cdnBase is the CDN's base URL: the started server's other host name, or,
// for a hub made by NewHandler, the host the request came to.
func (h *Hub) cdnBase(r *http.Request) string {
	if h.cdnURL != "" {
		return h.cdnURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// serveCDN serves an LFS file's content by sha256, without authorization.
func (h *Hub) serveCDN(w http.ResponseWriter, r *http.Request, sum, name string) {
	h.mu.Lock()
	data, ok := h.blobs[sum]
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	h.serveContent(w, r, name, data)
}

// serveContent sends data with Range support, applying the faults injected
// for name.
func (h *Hub) serveContent(w http.ResponseWriter, r *http.Request, name string, data []byte) {
	h.mu.Lock()
	corrupt := h.corrupt[name]
	cut, cutting := h.truncate[name]
	cutting = cutting && r.Method == http.MethodGet && r.Header.Get("Range") == ""
	if cutting {
		delete(h.truncate, name)
	}
	h.mu.Unlock()
	if corrupt {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0xff
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if cutting {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data[:cut])
		if flusher, ok := w.(http.Flusher); ok {
			flusher.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// authorize checks the token and the model as the public hub does, and
// answers the refusal itself.
func (h *Hub) authorize(w http.ResponseWriter, r *http.Request, modelID string) (*model, bool) {
	auth := r.Header.Get("Authorization")
	h.mu.Lock()
	token, m := h.token, h.models[modelID]
	h.mu.Unlock()
	switch {
	case token != "" && auth != "Bearer "+token:
		h.fail(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
	case m == nil && auth == "":
		h.fail(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
	case m == nil:
		h.fail(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
	case m.gated:
		h.fail(w, http.StatusForbidden, "GatedRepo", "Access to model "+modelID+" is restricted and you are not in the authorized list.")
	default:
		return m, true
	}
	return nil, false
}

// fail answers an error the way the hub does.
func (h *Hub) fail(w http.ResponseWriter, status int, code, message string) {
	h.mu.Lock()
	omit := h.omitErrorCodes
	h.mu.Unlock()
	if code != "" && !omit {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": message})
}

// resolve returns the commit a branch or commit id names.
func (m *model) resolve(revision string) (string, bool) {
	if _, ok := m.commits[revision]; ok {
		return revision, true
	}
	commit, ok := m.branches[revision]
	return commit, ok
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// unescapedSegments splits an escaped path into unescaped segments, so an
// escaped "/" (a revision such as "refs%2Fpr%2F1") stays in its segment.
func unescapedSegments(escaped string) ([]string, error) {
	segments := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, s := range segments {
		var err error
		if segments[i], err = url.PathUnescape(s); err != nil {
			return nil, err
		}
	}
	return segments, nil
}

func escapePath(name string) string {
	segments := strings.Split(name, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	return strings.Join(segments, "/")
}
