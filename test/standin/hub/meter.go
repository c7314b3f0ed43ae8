package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/time/rate"
)

// bytesPath answers, as a JSON object, the file bytes the hub sent to each
// client address: {"10.0.0.7": 33554432}. It is the stand-in's own path, not
// the hub's, so a benchmark can tell how much a pod downloaded.
const bytesPath = "/_standin/bytes"

// rateBurst is the most file bytes a response sends at once when its rate
// is bounded: small against any rate a benchmark sets, so a file's first
// bytes are not sent faster than the rest.
const rateBurst = 32 << 10

// meter wraps the hub: it counts the file bytes each client received and,
// with a rate, sends each file response's body at most that many bytes per
// second. File responses are GETs of a file (/{org}/{name}/resolve/...)
// and of an LFS file's content (/cdn-lfs/...) answered 200 or 206; listings,
// redirects and errors are neither counted nor slowed.
type meter struct {
	next http.Handler
	// bytesPerSecond bounds each file response; 0 sends at full speed.
	bytesPerSecond int

	mu sync.Mutex
	// served is the file bytes sent, by client IP.
	served map[string]int64
}

func newMeter(next http.Handler, bytesPerSecond int) *meter {
	return &meter{next: next, bytesPerSecond: bytesPerSecond, served: map[string]int64{}}
}

func (m *meter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == bytesPath {
		m.serveCounts(w, r)
		return
	}
	if r.Method != http.MethodGet || !isFilePath(r.URL.Path) {
		m.next.ServeHTTP(w, r)
		return
	}
	fw := &fileWriter{ResponseWriter: w, ctx: r.Context(), meter: m, client: clientIP(r.RemoteAddr)}
	if m.bytesPerSecond > 0 {
		// One limiter per response: the bound is per download, as a hub
		// or a CDN throttles each connection.
		fw.limiter = rate.NewLimiter(rate.Limit(m.bytesPerSecond), min(rateBurst, m.bytesPerSecond))
	}
	m.next.ServeHTTP(fw, r)
}

// serveCounts answers bytesPath.
func (m *meter) serveCounts(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m.counts())
}

// counts returns the file bytes sent so far by client IP.
func (m *meter) counts() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	counts := make(map[string]int64, len(m.served))
	for client, n := range m.served {
		counts[client] = n
	}
	return counts
}

func (m *meter) add(client string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.served[client] += int64(n)
}

// isFilePath reports whether path is one the hub serves a file's content
// at: /cdn-lfs/<sha256>/<name> or /<org>/<name>/resolve/<rev>/<file>
// (hubtest's routes).
func isFilePath(path string) bool {
	segments := strings.Split(strings.TrimPrefix(path, "/"), "/")
	return (len(segments) >= 3 && segments[0] == "cdn-lfs") || (len(segments) >= 5 && segments[2] == "resolve")
}

// clientIP is the host of a request's remote address.
func clientIP(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// fileWriter counts, and with a limiter paces, the body of one file
// response.
type fileWriter struct {
	http.ResponseWriter
	ctx     context.Context
	meter   *meter
	client  string
	limiter *rate.Limiter
	// status is the response's status once written.
	status int
}

func (w *fileWriter) WriteHeader(status int) {
	if w.status == 0 && status >= http.StatusOK {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write sends p, at most the limiter's burst at a time, counting what was
// sent for a 200 or 206 response.
func (w *fileWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	counted := w.status == http.StatusOK || w.status == http.StatusPartialContent
	written := 0
	for len(p) > 0 {
		chunk := p
		if w.limiter != nil && counted {
			chunk = p[:min(len(p), w.limiter.Burst())]
			if err := w.limiter.WaitN(w.ctx, len(chunk)); err != nil {
				return written, err
			}
		}
		n, err := w.ResponseWriter.Write(chunk)
		written += n
		if counted {
			w.meter.add(w.client, n)
		}
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Flush keeps the hub's cut-off responses (hubtest's CutNext) flushed.
func (w *fileWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *fileWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
