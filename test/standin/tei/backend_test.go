package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TEI's /health waits behind the batches queued before it: a busy backend
// holds the answer, which comes once the batch is done.
func TestHealthWaitsBehindTheBatchesBeforeIt(t *testing.T) {
	g := NewWithT(t)
	thread := startBackendThread()
	release, busy := make(chan struct{}), make(chan struct{})
	go func() { _ = thread.do(context.Background(), func() { close(busy); <-release }) }()
	<-busy

	answered := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		healthHandler(thread)(w, httptest.NewRequest(http.MethodGet, "/health", nil))
		answered <- w.Code
	}()
	g.Consistently(answered).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "/health answered while a batch ran")
	close(release)
	g.Eventually(answered).Should(Receive(Equal(http.StatusOK)))
}
