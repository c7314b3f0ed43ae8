package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

// serving runs the hub with opts until the test ends and returns its URL
// and the commits it printed.
func serving(t *testing.T, opts options) (string, []commit) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out strings.Builder
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, opts, &out, func(a net.Addr) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the hub ended with %v", err)
		}
	})
	var url string
	select {
	case a := <-addr:
		url = "http://" + a.String()
	case err := <-done:
		t.Fatalf("the hub did not start: %v", err)
	}
	var commits []commit
	dec := json.NewDecoder(strings.NewReader(out.String()))
	for dec.More() {
		var c commit
		if err := dec.Decode(&c); err != nil {
			t.Fatal(err)
		}
		commits = append(commits, c)
	}
	return url, commits
}

func TestServesTheModelsFileToPopulate(t *testing.T) {
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "models.json")
	g.Expect(os.WriteFile(file, []byte(`{"models": [
		{"id": "org/embed", "branch": "main", "repository": "multi-format", "unit": 1024, "without": ["onnx/model.onnx"]},
		{"id": "org/tiny", "files": [
			{"name": "config.json", "content": "{\"model_type\": \"bert\"}"},
			{"name": "tokenizer.json", "content": "{}"},
			{"name": "model.safetensors", "size": 2048, "lfs": true}]}
	]}`), 0o600)).To(Succeed())
	url, commits := serving(t, options{addr: "127.0.0.1:0", modelsFile: file, token: "hf_t"})

	g.Expect(commits).To(HaveLen(2))
	for _, c := range commits {
		result, err := populate.Run(context.Background(), populate.Options{
			Model: c.Model, Dir: t.TempDir(), Endpoint: url, Token: "hf_t", Image: "text-embeddings-inference:1.9", MaxAttempts: 1,
		})
		g.Expect(err).NotTo(HaveOccurred(), c.Model)
		g.Expect(result.ResolvedCommit).To(Equal(c.Commit), "main names the printed commit")
		g.Expect(result.Names).To(ContainElement("model.safetensors"), "an LFS file, through the redirect")
	}

	_, err := populate.Run(context.Background(), populate.Options{Model: "org/embed", Dir: t.TempDir(), Endpoint: url, MaxAttempts: 1})
	g.Expect(err).To(HaveOccurred(), "the hub requires the token")
}

func TestModelFlagsServeMultiFormatRepositories(t *testing.T) {
	g := NewWithT(t)
	url, commits := serving(t, options{addr: "127.0.0.1:0", models: []string{"org/a", "org/b"}, unit: 64})
	g.Expect(commits).To(HaveLen(2))
	result, err := populate.Run(context.Background(), populate.Options{
		Model: "org/b", Dir: t.TempDir(), Endpoint: url, Image: "text-embeddings-inference:cpu-1.9", MaxAttempts: 1,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Names).To(ContainElement("onnx/model.onnx"))
}

func TestRefusesModelsItCannotServe(t *testing.T) {
	cases := map[string]options{
		"no models":          {addr: "127.0.0.1:0"},
		"unknown repository": {addr: "127.0.0.1:0", modelsFile: "testdata/unknown-repository.json"},
		"missing file":       {addr: "127.0.0.1:0", modelsFile: "testdata/absent.json"},
		"negative rate":      {addr: "127.0.0.1:0", models: []string{"org/a"}, rateBytesPerSecond: -1},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(run(context.Background(), opts, &strings.Builder{}, nil)).NotTo(Succeed())
		})
	}
}

func TestServesAPinnedCommitUnderItsID(t *testing.T) {
	g := NewWithT(t)
	const pinned = "d4aa6901d3a41ba39fb536a557fa166f842b0e09"
	file := filepath.Join(t.TempDir(), "models.json")
	g.Expect(os.WriteFile(file, []byte(`{"models": [
		{"id": "org/pinned", "commit": "`+pinned+`", "repository": "multi-format", "unit": 64}
	]}`), 0o600)).To(Succeed())
	url, commits := serving(t, options{addr: "127.0.0.1:0", modelsFile: file})
	g.Expect(commits).To(Equal([]commit{{Model: "org/pinned", Branch: "main", Commit: pinned}}))
	for _, revision := range []string{pinned, "main"} {
		result, err := populate.Run(context.Background(), populate.Options{
			Model: "org/pinned", Revision: revision, Dir: t.TempDir(), Endpoint: url, Image: "text-embeddings-inference:1.9", MaxAttempts: 1,
		})
		g.Expect(err).NotTo(HaveOccurred(), revision)
		g.Expect(result.ResolvedCommit).To(Equal(pinned), revision)
	}
}
