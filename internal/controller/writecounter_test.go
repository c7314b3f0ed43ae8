package controller

import (
	"maps"
	"net/http"
	"strings"
	"sync"
)

// writeCounter counts the requests that change something on the API server,
// by resource ("statefulsets", "embeddingservers/status", ...). Reads,
// watches and dry runs are not writes.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newWriteCounter() *writeCounter {
	return &writeCounter{counts: map[string]int{}}
}

// wrap is a rest.Config WrapTransport.
func (c *writeCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if isWrite(req) {
			c.mu.Lock()
			c.counts[resourceOf(req.URL.Path)]++
			c.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

// snapshot returns the counts so far.
func (c *writeCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// since returns, for every resource, the writes made after before.
func (c *writeCounter) since(before map[string]int) map[string]int {
	delta := map[string]int{}
	for resource, n := range c.snapshot() {
		if d := n - before[resource]; d != 0 {
			delta[resource] = d
		}
	}
	return delta
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
