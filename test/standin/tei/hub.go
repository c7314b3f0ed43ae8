package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// errNotOnHub is wrapped when the model's commit does not have a file.
var errNotOnHub = errors.New("the model has no such file")

// hubClient asks the hub for a model's files, as hf-hub 0.4's tokio Api
// does (src/api/tokio.rs): the token as a bearer, the revision escaped as
// one path segment.
type hubClient struct {
	endpoint string
	token    string
	client   *http.Client
}

// revisionInfo is the hub's answer about a revision (ApiRepo::info, GET
// /api/models/<id>/revision/<revision>): its commit and files.
type revisionInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
	} `json:"siblings"`
}

// has reports whether the revision lists file.
func (i *revisionInfo) has(file string) bool {
	for _, s := range i.Siblings {
		if s.RFilename == file {
			return true
		}
	}
	return false
}

// info resolves revision to its commit and files.
func (h *hubClient) info(ctx context.Context, modelID, revision string) (*revisionInfo, error) {
	resp, err := h.get(ctx, h.endpoint+"/api/models/"+modelID+"/revision/"+url.PathEscape(revision))
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var info revisionInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, fmt.Errorf("reading the revision info of %s at %s: %w", modelID, revision, err)
	}
	if info.SHA == "" {
		return nil, fmt.Errorf("the revision info of %s at %s names no commit", modelID, revision)
	}
	return &info, nil
}

// download fetches file of commit, following the hub's redirect to its CDN,
// and returns the body and the blob name hf-hub stores it under: the LFS
// sha256 (X-Linked-Etag) or the git blob id (ETag), unquoted.
func (h *hubClient) download(ctx context.Context, modelID, commit, file string) (io.ReadCloser, string, error) {
	resp, err := h.get(ctx, h.endpoint+"/"+modelID+"/resolve/"+commit+"/"+escapePath(file))
	if err != nil {
		return nil, "", err
	}
	header := resp.Header
	if resp.Request.Response != nil {
		header = resp.Request.Response.Header // the hub's, before the redirect
	}
	blob := header.Get("X-Linked-Etag")
	if blob == "" {
		blob = header.Get("ETag")
	}
	blob = strings.Trim(strings.TrimPrefix(blob, "W/"), `"`)
	if blob == "" || strings.ContainsAny(blob, `/\`) {
		_ = resp.Body.Close()
		return nil, "", fmt.Errorf("downloading %s: the hub sent no ETag", file)
	}
	return resp.Body, blob, nil
}

// get sends an authorized GET and refuses any answer but 200.
func (h *hubClient) get(ctx context.Context, target string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", target, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp, nil
}

// escapePath escapes each segment of a "/"-separated file name.
func escapePath(name string) string {
	segments := strings.Split(name, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	return strings.Join(segments, "/")
}
