package populate

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Headers the hub sets on GET and HEAD /{model}/resolve/{revision}/{file}.
const (
	headerLinkedETag = "X-Linked-Etag"
	headerLinkedSize = "X-Linked-Size"
	headerRepoCommit = "X-Repo-Commit"
)

// metadata learns a file's blob and expectation from the hub's headers, for
// a file the listing gave no blob metadata (hub mirrors list names only).
// It follows huggingface_hub's get_hf_file_metadata
// (src/huggingface_hub/file_download.py): a HEAD request that follows only
// relative redirects, so the headers are the hub's, not its CDN's; the blob
// is X-Linked-Etag (an LFS file's sha256) or else ETag (a git blob id), with
// quotes and a weak "W/" prefix dropped; the size is X-Linked-Size, or else
// Content-Length of an answer that is not a redirect. hf-hub (src/api/tokio.rs,
// ApiRepo::metadata) reads the same headers. A file whose headers carry
// neither a sha256 nor a git blob id is refused: nothing could verify it.
func (h *hub) metadata(ctx context.Context, model, commit, name string) (remoteFile, error) {
	target := h.fileURL(model, commit, name)
	var header http.Header
	var status int
	err := h.retry.run(ctx, "asking for the metadata of "+name, func(ctx context.Context) (bool, error) {
		resp, err := h.headWithin(ctx, target)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		header, status = resp.Header, resp.StatusCode
		return false, nil
	})
	if err != nil {
		return remoteFile{}, h.explain(ctx, err, subject{model: model, revision: commit, file: name})
	}
	return fileFromHeaders(name, commit, header, status)
}

// fileFromHeaders reads a file's blob, digest and size from the hub's
// answer to a HEAD of the file.
func fileFromHeaders(name, commit string, header http.Header, status int) (remoteFile, error) {
	if got := header.Get(headerRepoCommit); got != "" && got != commit {
		return remoteFile{}, fmt.Errorf("%w answer: file %q was served from commit %s, not %s", ErrInvalid, name, got, commit)
	}
	f := remoteFile{name: name}
	linked, etag := normalETag(header.Get(headerLinkedETag)), normalETag(header.Get("ETag"))
	sizeHeader := header.Get(headerLinkedSize)
	switch {
	case linked != "":
		if !sha256Pattern.MatchString(linked) {
			return remoteFile{}, fmt.Errorf("%w answer: file %q has %s %q, not a sha256", ErrInvalid, name, headerLinkedETag, linked)
		}
		f.blob, f.want.sha256 = linked, linked
	case gitBlobPattern.MatchString(etag):
		f.blob, f.want.gitBlob = etag, etag
		if sizeHeader == "" && status < 300 {
			sizeHeader = header.Get("Content-Length")
		}
	default:
		return remoteFile{}, fmt.Errorf("%w: file %q is listed without blob metadata and its headers carry neither an %s sha256 nor a git blob id ETag (ETag %q): it cannot be verified",
			ErrInvalid, name, headerLinkedETag, etag)
	}
	size, err := strconv.ParseInt(sizeHeader, 10, 64)
	if err != nil || size < 0 {
		return remoteFile{}, fmt.Errorf("%w answer: file %q has no size in its headers (%q)", ErrInvalid, name, sizeHeader)
	}
	f.want.size = size
	return f, nil
}

// normalETag drops the weak prefix and the quotes of an ETag, as
// huggingface_hub's _normalize_etag does, and lowercases it.
func normalETag(etag string) string {
	return strings.ToLower(strings.Trim(strings.TrimPrefix(strings.TrimSpace(etag), "W/"), `"`))
}

// headWithin is head bounded by the metadata timeout, as huggingface_hub
// bounds get_hf_file_metadata's HEAD by HF_HUB_ETAG_TIMEOUT
// (src/huggingface_hub/file_download.py). A HEAD that times out is
// transient, so it is retried.
func (h *hub) headWithin(ctx context.Context, target string) (*http.Response, error) {
	if h.metadataTimeout <= 0 {
		return h.head(ctx, target)
	}
	attempt, cancel := context.WithTimeout(ctx, h.metadataTimeout)
	defer cancel()
	resp, err := h.head(attempt, target)
	if err != nil && ctx.Err() == nil && attempt.Err() != nil {
		return nil, transient(fmt.Errorf("no answer within %s: %w", h.metadataTimeout, err))
	}
	return resp, err
}

// head sends an authorized HEAD that follows relative redirects only, and
// returns a 2xx or 3xx answer. Any other answer is a *statusError, transient
// for 408, 429 and 5xx.
func (h *hub) head(ctx context.Context, target string) (*http.Response, error) {
	req, err := h.request(ctx, http.MethodHead, target)
	if err != nil {
		return nil, err
	}
	client := *h.client
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		location, err := url.Parse(req.Response.Header.Get("Location"))
		if err != nil || location.Host != "" || len(via) >= 10 {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, networkError(ctx, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, answerError(resp)
}
