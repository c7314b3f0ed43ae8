package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate/hubtest"
	"github.com/embedops/embedops/internal/tei"
)

// get sends a GET to url with an optional bearer key and returns the status
// and body.
func get(g Gomega, url, key string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return send(g, req)
}

// embed posts body to /embed with an optional bearer key.
func embed(g Gomega, p *process, key, body string) (int, string) {
	req, err := http.NewRequest(http.MethodPost, "http://"+p.api+"/embed", strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return send(g, req)
}

func send(g Gomega, req *http.Request) (int, string) {
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

func TestStartsFromAPopulatedCacheWithoutTheHub(t *testing.T) {
	cases := []struct {
		name     string
		image    string
		backends string
	}{
		{"cpu image, ORT weights", cpuImage, ""},
		{"CUDA image, candle weights", cudaImage, "candle"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			hub.AddCommit(testModel, "main", hubtest.MultiFormatRepository(512)...)
			dir := t.TempDir()
			commit := populated(t, hub, dir, "main", tc.image)
			hub.Close()

			// The pod the operator starts once the cache is populated:
			// --revision is the resolved commit.
			p := start(t, args("--model-id="+testModel, "--revision="+commit, "--json-output"),
				containerEnv(dir, hub.URL, map[string]string{BackendsVariable: tc.backends}))

			g.Expect(p.api).NotTo(BeEmpty(), "stdout:\n%s", p.stdout)
			status, _ := get(g, "http://"+p.api+"/health", "")
			g.Expect(status).To(Equal(http.StatusOK))
			status, body := get(g, "http://"+p.api+"/info", "")
			g.Expect(status).To(Equal(http.StatusOK))
			var got map[string]any
			g.Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
			g.Expect(got).To(HaveKeyWithValue("model_id", testModel))
			g.Expect(got).To(HaveKeyWithValue("model_sha", commit))
			g.Expect(got).To(HaveKeyWithValue("model_type", HaveKeyWithValue("embedding", HaveKeyWithValue("pooling", "mean"))))
		})
	}
}

func TestDownloadsWhatTheCacheLacksIntoTheHubCacheLayout(t *testing.T) {
	g := NewWithT(t)
	hub := hubtest.New(t)
	hub.RequireToken("hf_secret")
	repo := hubtest.MultiFormatRepository(512)
	commit := hub.AddCommit(testModel, "main", repo...)
	dir := t.TempDir()

	p := start(t, args("--model-id="+testModel), containerEnv(dir, hub.URL, map[string]string{"HF_TOKEN": "hf_secret"}))

	g.Expect(p.api).NotTo(BeEmpty(), "stdout:\n%s", p.stdout)
	folder := filepath.Join(dir, "models--org--embed")
	g.Expect(os.ReadFile(filepath.Join(folder, "refs", "main"))).To(BeEquivalentTo(commit))
	for _, name := range []string{"config.json", "tokenizer.json", "1_Pooling/config.json", "onnx/model.onnx", "tokenizer_config.json"} {
		link := filepath.Join(folder, "snapshots", commit, name)
		target, err := os.Readlink(link)
		g.Expect(err).NotTo(HaveOccurred(), "%s is a link to its blob", name)
		g.Expect(filepath.Clean(filepath.Join(filepath.Dir(link), target))).To(HavePrefix(filepath.Join(folder, "blobs")))
		g.Expect(os.ReadFile(link)).To(Equal(fileNamed(repo, name).Data))
	}
	_, err := os.Stat(filepath.Join(folder, "snapshots", commit, "model.safetensors"))
	g.Expect(err).To(MatchError(os.ErrNotExist), "ORT started: candle's weights are not fetched")
	for _, r := range hub.Requests() {
		if !strings.HasPrefix(r.Path, "/cdn-lfs/") {
			g.Expect(r.Authorization).To(Equal("Bearer hf_secret"), r.Path)
		}
	}
	status, body := get(g, "http://"+p.api+"/info", "")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`"model_sha":null`), "no --revision: TEI reports none")
}

func TestFailsToStartWithoutTheModel(t *testing.T) {
	cases := []struct {
		name    string
		files   []hubtest.File
		env     map[string]string
		message string
	}{
		{"a model the hub does not have", nil, nil, "could not download model artifacts"},
		{"no weights for the image's backends", without(hubtest.MultiFormatRepository(64), "onnx/model.onnx", "model.safetensors", "pytorch_model.bin"), nil, "could not create backend"},
		{"ONNX only, for the CUDA image", without(hubtest.MultiFormatRepository(64), "model.safetensors", "pytorch_model.bin"),
			map[string]string{BackendsVariable: "candle"}, "could not create backend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			if tc.files != nil {
				hub.AddCommit(testModel, "main", tc.files...)
			}
			p := start(t, args("--model-id="+testModel), containerEnv(t.TempDir(), hub.URL, tc.env))
			g.Expect(p.exitCode()).To(Equal(1))
			g.Expect(p.stderr.String()).To(HavePrefix("Error: " + tc.message))
		})
	}
}

func TestRefusesWhatClapRefusesWithStatus2(t *testing.T) {
	cases := []struct {
		name    string
		argv    []string
		env     map[string]string
		message string
	}{
		{"HF_TOKEN and HF_API_TOKEN", []string{"--model-id=" + testModel}, map[string]string{"HF_TOKEN": "a", "HF_API_TOKEN": "b"},
			"error: the argument '--hf-token <HF_TOKEN>' cannot be used with '--hf-api-token <HF_API_TOKEN>'"},
		{"no model id", nil, nil, "required arguments were not provided"},
		{"an argument TEI does not have", []string{"--model-id=" + testModel, "--max-input-length=512"}, nil, "unexpected argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			p := start(t, args(tc.argv...), containerEnv(t.TempDir(), hub.URL, tc.env))
			g.Expect(p.exitCode()).To(Equal(tei.UsageExitCode))
			g.Expect(p.stderr.String()).To(HavePrefix("error: "))
			g.Expect(p.stderr.String()).To(ContainSubstring(tc.message))
			g.Expect(p.stderr.String()).To(ContainSubstring("Usage: text-embeddings-router"))
			g.Expect(hub.Requests()).To(BeEmpty(), "nothing is fetched")
		})
	}
}

// fileNamed returns the file of files named name.
func fileNamed(files []hubtest.File, name string) hubtest.File {
	for _, f := range files {
		if f.Name == name {
			return f
		}
	}
	panic("no file " + name)
}

// without returns files but those named.
func without(files []hubtest.File, drop ...string) []hubtest.File {
	var out []hubtest.File
	for _, f := range files {
		keep := true
		for _, d := range drop {
			keep = keep && f.Name != d
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}
