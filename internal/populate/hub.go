package populate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Error codes the hub sets in X-Error-Code beside a 4xx status.
const (
	codeRepoNotFound     = "RepoNotFound"
	codeRevisionNotFound = "RevisionNotFound"
	codeEntryNotFound    = "EntryNotFound"
	codeGatedRepo        = "GatedRepo"
)

// maxRetryAfter bounds the wait a hub may ask for in Retry-After.
const maxRetryAfter = 5 * time.Minute

// hub is a client of the HuggingFace hub HTTP API.
type hub struct {
	endpoint string
	token    string
	client   *http.Client
	// metadataTimeout bounds each HEAD request for a file's metadata; 0
	// leaves the client's own timeouts.
	metadataTimeout time.Duration
	retry           retrier
}

// revisionInfo is the hub's answer to GET /api/models/{model}/revision/{rev}?blobs=true.
type revisionInfo struct {
	SHA      string    `json:"sha"`
	Siblings []sibling `json:"siblings"`
}

// sibling is one file of a revisionInfo.
type sibling struct {
	RFilename string   `json:"rfilename"`
	BlobID    string   `json:"blobId"`
	Size      *int64   `json:"size"`
	LFS       *lfsInfo `json:"lfs"`
}

// lfsInfo describes a file stored with git LFS.
type lfsInfo struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// subject names what a request was about, for error messages. For a file,
// revision is the commit.
type subject struct {
	model, revision, file string
}

func (s subject) String() string {
	if s.file != "" {
		return fmt.Sprintf("file %q of model %q at commit %s", s.file, s.model, s.revision)
	}
	return fmt.Sprintf("model %q at revision %q", s.model, s.revision)
}

// statusError is a non-2xx answer of the hub.
type statusError struct {
	status  int
	code    string
	message string
}

func (e *statusError) Error() string {
	msg := fmt.Sprintf("HTTP %d", e.status)
	if e.message != "" {
		msg += ": " + e.message
	}
	return msg
}

// resolve returns the commit a revision names and the files of that commit.
func (h *hub) resolve(ctx context.Context, model, revision string) (*revisionInfo, error) {
	apiURL := h.endpoint + "/api/models/" + model + "/revision/" + url.PathEscape(revision) + "?blobs=true"
	var info revisionInfo
	err := h.retry.run(ctx, "resolving revision", func(ctx context.Context) (bool, error) {
		resp, err := h.get(ctx, apiURL, "")
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		var answer revisionInfo
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&answer); err != nil {
			return false, networkError(ctx, fmt.Errorf("decoding the hub's answer for %s at %s: %w", model, revision, err))
		}
		info = answer
		return false, nil
	})
	if err != nil {
		return nil, h.explain(ctx, err, subject{model: model, revision: revision})
	}
	return &info, nil
}

// request is an authorized request for target that asks for the bytes as
// stored: a compressed answer breaks Range and sizes.
func (h *hub) request(ctx context.Context, method, target string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, fmt.Errorf("building a request for %s: %w", target, err)
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("User-Agent", "embedops-populate")
	return req, nil
}

// get sends an authorized GET and returns a 2xx response, whose body the
// caller closes. Any other answer is a *statusError, transient for 408, 429
// and 5xx.
func (h *hub) get(ctx context.Context, target, byteRange string) (*http.Response, error) {
	req, err := h.request(ctx, http.MethodGet, target)
	if err != nil {
		return nil, err
	}
	if byteRange != "" {
		req.Header.Set("Range", byteRange)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, networkError(ctx, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, answerError(resp)
}

// answerError reads a non-2xx answer into a *statusError, marked transient
// when a retry may succeed.
func answerError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	err := &statusError{status: resp.StatusCode, code: resp.Header.Get("X-Error-Code"), message: hubMessage(body)}
	switch {
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		if seconds, ok := oversizedRetryAfter(resp.Header.Get("Retry-After")); ok {
			// Waiting hours in an init container helps no one: say so.
			err.message = strings.TrimSpace(fmt.Sprintf("%s (the hub asks to retry after %ds, longer than the %s populate waits: try again later)",
				err.message, seconds, maxRetryAfter))
			return err
		}
		return &transientError{err: err, after: parseRetryAfter(resp.Header.Get("Retry-After"))}
	default:
		return err
	}
}

// hubMessage extracts the hub's {"error": "..."} message, or a short,
// printable excerpt of any other body.
func hubMessage(body []byte) string {
	var answer struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &answer) == nil && answer.Error != "" {
		msg = answer.Error
	}
	if !utf8.ValidString(msg) || strings.ContainsAny(msg, "<\n") {
		return ""
	}
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return msg
}

// parseRetryAfter reads a Retry-After header given in seconds.
func parseRetryAfter(value string) time.Duration {
	seconds, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil || seconds <= 0 {
		return 0
	}
	return min(time.Duration(seconds)*time.Second, maxRetryAfter)
}

// oversizedRetryAfter returns a Retry-After given in seconds that exceeds
// maxRetryAfter.
func oversizedRetryAfter(value string) (int64, bool) {
	seconds, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	return seconds, err == nil && seconds > int64(maxRetryAfter/time.Second)
}

// explain turns a refusal or a 404 into an error that says what to fix, and
// names the model, revision or file that is missing.
func (h *hub) explain(ctx context.Context, err error, about subject) error {
	var answer *statusError
	if !errors.As(err, &answer) || isTransient(err) {
		return err
	}
	switch answer.status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w (HTTP %d for model %q%s)", ErrAccessDenied, answer.status, about.model, h.refusalHint(answer))
	case http.StatusNotFound:
		return h.notFound(ctx, answer, about)
	default:
		return fmt.Errorf("%s: the hub answered %w", about, answer)
	}
}

// refusalHint says why the hub may have refused the request.
func (h *hub) refusalHint(answer *statusError) string {
	var hints []string
	switch answer.code {
	case codeRepoNotFound:
		hints = append(hints, "the model does not exist or is private")
	case codeGatedRepo:
		hints = append(hints, "the model is gated: accept its conditions on the hub with the token's account")
	}
	if h.token == "" {
		hints = append(hints, "no token was sent")
	}
	if answer.message != "" {
		hints = append(hints, "the hub says: "+answer.message)
	}
	if len(hints) == 0 {
		return ""
	}
	return "; " + strings.Join(hints, "; ")
}

// notFound names what is missing: from X-Error-Code when the hub sets it,
// else by asking whether the model itself exists.
func (h *hub) notFound(ctx context.Context, answer *statusError, about subject) error {
	model := fmt.Errorf("model %q: %w", about.model, ErrNotFound)
	revision := fmt.Errorf("revision %q of model %q: %w", about.revision, about.model, ErrNotFound)
	if about.file != "" {
		if answer.code == codeRepoNotFound {
			return model
		}
		return fmt.Errorf("%s: %w", about, ErrNotFound)
	}
	switch answer.code {
	case codeRepoNotFound:
		return model
	case codeRevisionNotFound:
		return revision
	}
	resp, err := h.get(ctx, h.endpoint+"/api/models/"+about.model, "")
	if err == nil {
		resp.Body.Close()
		return revision
	}
	var probe *statusError
	if errors.As(err, &probe) && probe.status == http.StatusNotFound {
		return model
	}
	return fmt.Errorf("model %q or its revision %q: %w", about.model, about.revision, ErrNotFound)
}

// fileURL is where the hub serves a file of a commit.
func (h *hub) fileURL(model, commit, name string) string {
	segments := strings.Split(name, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	return h.endpoint + "/" + model + "/resolve/" + commit + "/" + strings.Join(segments, "/")
}
