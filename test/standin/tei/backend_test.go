package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TEI's /health waits behind the batches queued before it: a busy backend
// holds the answer, which comes once the batch is done.
func TestHealthWaitsBehindTheBatchesBeforeIt(t *testing.T) {
	g := NewWithT(t)
	thread := startBackendThread(0)
	release := occupy(thread)

	answered := make(chan int, 1)
	go func() { answered <- statusOf(healthHandler(thread), http.MethodGet, "/health", "") }()
	g.Consistently(answered).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "/health answered while a batch ran")
	close(release)
	g.Eventually(answered).Should(Receive(Equal(http.StatusOK)))
}

// With /embed batches queued on the backend thread, each computing for the
// set time, /health queues behind them and answers only once all of them
// ran, as TEI's BackendCommand::Health does behind its batches.
func TestHealthAnswersOnlyAfterTheQueuedBatches(t *testing.T) {
	g := NewWithT(t)
	thread := startBackendThread(0)
	release := occupy(thread)
	embed := &embedHandler{
		modelID: testModel, model: &model{dim: 8}, maxBatch: 4, compute: 20 * time.Millisecond,
		metrics: newMetrics(), log: slog.New(slog.DiscardHandler), backend: thread,
	}
	const batches = 3
	embedded := make(chan int, batches)
	for range batches {
		go func() { embedded <- statusOf(embed, http.MethodPost, "/embed", `{"inputs": ["a", "b"]}`) }()
	}
	g.Eventually(thread.queued).Should(Equal(batches), "the batches wait for the busy backend")
	type answer struct{ status, finished int }
	answered := make(chan answer, 1)
	go func() {
		status := statusOf(healthHandler(thread), http.MethodGet, "/health", "")
		answered <- answer{status, int(thread.finished.Load())}
	}()
	g.Eventually(thread.queued).Should(Equal(batches+1), "/health is queued behind the batches")

	close(release)
	g.Eventually(answered).Should(Receive(Equal(answer{http.StatusOK, 1 + batches + 1})),
		"/health answered once the busy command, the batches and itself ran")
	for range batches {
		g.Eventually(embedded).Should(Receive(Equal(http.StatusOK)))
	}
}

// A backend that dies at its second batch fails that batch and every one
// after it with TEI's 424, and /health answers 503 at once, even queued
// behind batches: they fail without computing.
func TestADeadBackendFailsEveryBatchAndHealth(t *testing.T) {
	g := NewWithT(t)
	thread := startBackendThread(2)
	embed := &embedHandler{
		modelID: testModel, model: &model{dim: 8}, maxBatch: 4, compute: time.Hour,
		metrics: newMetrics(), log: slog.New(slog.DiscardHandler), backend: thread,
	}
	g.Expect(statusOf(healthHandler(thread), http.MethodGet, "/health", "")).To(Equal(http.StatusOK))
	embed.compute = 0
	g.Expect(statusOf(embed, http.MethodPost, "/embed", `{"inputs": "a"}`)).To(Equal(http.StatusOK), "the first batch computes")
	embed.compute = time.Hour
	for batch := 2; batch <= 4; batch++ {
		g.Expect(statusOf(embed, http.MethodPost, "/embed", `{"inputs": "a"}`)).To(Equal(http.StatusFailedDependency), "batch %d computes nothing", batch)
	}
	w := httptest.NewRecorder()
	healthHandler(thread).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health", nil))
	g.Expect(w.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(w.Body.String()).To(MatchJSON(`{"error": "unhealthy", "error_type": "Unhealthy"}`))
}

// occupy holds the backend thread with a command until the returned
// channel is closed.
func occupy(thread *backendThread) chan struct{} {
	release, busy := make(chan struct{}), make(chan struct{})
	go func() { _ = thread.do(context.Background(), func() { close(busy); <-release }) }()
	<-busy
	return release
}

// statusOf answers one request with h and returns the status.
func statusOf(h http.Handler, method, path, body string) int {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	h.ServeHTTP(w, r)
	return w.Code
}
