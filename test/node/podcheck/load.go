package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// maxFailuresKept bounds the failures a load report lists.
const maxFailuresKept = 20

// loadStats is what `podcheck load` counted so far.
type loadStats struct {
	mu       sync.Mutex
	Sent     int      `json:"sent"`
	OK       int      `json:"ok"`
	Failed   int      `json:"failed"`
	Failures []string `json:"failures,omitempty"`
}

// load POSTs one input to URL (a TEI /embed through a Service) every
// INTERVAL, each on a new connection, as kube-proxy balances connections
// (a kept-alive connection stays on the pod it reached), and serves what
// it counted as JSON at http://ADDR/stats until SIGTERM.
func load(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: podcheck load URL INTERVAL ADDR")
	}
	interval, err := time.ParseDuration(args[1])
	if err != nil {
		return err
	}
	stats := &loadStats{}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		stats.mu.Lock()
		defer stats.mu.Unlock()
		_ = json.NewEncoder(w).Encode(stats)
	})
	server := &http.Server{Addr: args[2], Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.ListenAndServe() }()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	stop := make(chan struct{})
	go func() { waitForSignal(); close(stop) }()
	for {
		select {
		case <-stop:
			report(fmt.Sprintf("sent %d, %d answered 200, %d failed", stats.Sent, stats.OK, stats.Failed))
			return nil
		case <-ticker.C:
			stats.record(embedOnce(client, args[0]))
		}
	}
}

// embedOnce POSTs one input and returns why it failed, nil on a 200.
func embedOnce(client *http.Client, url string) error {
	resp, err := client.Post(url, "application/json", bytes.NewBufferString(`{"inputs":"load"}`)) //nolint:noctx // bounded by the client's timeout
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// record counts one request.
func (s *loadStats) record(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Sent++
	if err == nil {
		s.OK++
		return
	}
	s.Failed++
	if len(s.Failures) < maxFailuresKept {
		s.Failures = append(s.Failures, time.Now().UTC().Format(time.RFC3339Nano)+" "+err.Error())
	}
}
