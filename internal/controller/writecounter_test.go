package controller

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// writeCounter counts the requests that change something on the API server,
// by resource ("statefulsets", "embeddingservers/status", ...). Reads,
// watches and dry runs are not writes.
// It also counts the collection reads (lists and watches) by resource, and
// every request but a watch by method and resource ("GET statefulsets"),
// and keeps the method and path of every write ("PATCH /apis/..."), and
// of every write the API server refused ("PATCH /apis/... 422"), and the
// method and path of every request, watches too ("GET /api/...").
type writeCounter struct {
	mu          sync.Mutex
	counts      map[string]int
	collections map[string]int
	requests    map[string]int
	writes      []string
	refused     []string
	all         []string
}

func newWriteCounter() *writeCounter {
	return &writeCounter{counts: map[string]int{}, collections: map[string]int{}, requests: map[string]int{}}
}

// wrap is a rest.Config WrapTransport.
func (c *writeCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.all = append(c.all, req.Method+" "+req.URL.Path)
		if req.URL.Query().Get("watch") != "true" {
			c.requests[req.Method+" "+resourceOf(req.URL.Path)]++
		}
		switch {
		case isWrite(req):
			c.counts[resourceOf(req.URL.Path)]++
			c.writes = append(c.writes, req.Method+" "+req.URL.Path)
		case req.Method == http.MethodGet:
			c.collections[collectionOf(req.URL.Path)]++
		}
		c.mu.Unlock()
		resp, err := next.RoundTrip(req)
		if err == nil && isWrite(req) && resp.StatusCode >= http.StatusBadRequest {
			c.mu.Lock()
			c.refused = append(c.refused, fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, resp.StatusCode))
			c.mu.Unlock()
		}
		return resp, err
	})
}

// refusedWrites are the writes the API server refused so far.
func (c *writeCounter) refusedWrites() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.refused)
}

// collectionReads is how many lists and watches of resource were made.
func (c *writeCounter) collectionReads(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.collections[resource]
}

// collectionOf returns the resource of a GET of a collection
// (/api/v1/namespaces/ns/secrets, /api/v1/secrets), "" for a GET of one
// object.
func collectionOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if i := slices.Index(parts, "namespaces"); i >= 0 && i+2 < len(parts) {
		parts = parts[i+2:]
		if len(parts) == 1 {
			return parts[0]
		}
		return ""
	}
	// /api/v1/<resource> or /apis/<group>/<version>/<resource>.
	if (parts[0] == "api" && len(parts) == 3) || (parts[0] == "apis" && len(parts) == 4) {
		return parts[len(parts)-1]
	}
	return ""
}

// requestPaths returns the method and path of every request so far.
func (c *writeCounter) requestPaths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

// writePaths returns the method and path of every write so far.
func (c *writeCounter) writePaths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}

// snapshot returns the counts so far.
func (c *writeCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// requestSnapshot returns the requests so far.
func (c *writeCounter) requestSnapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.requests)
}

// requestsSince returns, for every method and resource, the requests made
// after before.
func (c *writeCounter) requestsSince(before map[string]int) map[string]int {
	return delta(c.requestSnapshot(), before)
}

// since returns, for every resource, the writes made after before.
func (c *writeCounter) since(before map[string]int) map[string]int {
	return delta(c.snapshot(), before)
}

// delta returns the counts of now that differ from before, less before.
func delta(now, before map[string]int) map[string]int {
	changed := map[string]int{}
	for resource, n := range now {
		if d := n - before[resource]; d != 0 {
			changed[resource] = d
		}
	}
	return changed
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// isWrite is true for POST, PUT, PATCH and DELETE requests that are not dry
// runs.
func isWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return req.URL.Query().Get("dryRun") != "All"
}

// resourceOf returns "<resource>[/<subresource>]" of an API path such as
// /apis/apps/v1/namespaces/ns/statefulsets/name/status.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, part := range parts {
		if part == "namespaces" && i+2 < len(parts) {
			parts = parts[i+2:]
			break
		}
	}
	switch {
	case len(parts) >= 3:
		return parts[0] + "/" + parts[2]
	case len(parts) >= 1:
		return parts[0]
	default:
		return path
	}
}
