package main

import (
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate/hubtest"
)

// serving starts the stand-in on a cache populated for the cpu image, with
// the model id, argv and env, on ports the system picks, on 127.0.0.1
// unless argv says where.
func serving(t *testing.T, argv []string, env map[string]string) *process {
	t.Helper()
	hub := hubtest.New(t)
	hub.AddCommit(testModel, "main", hubtest.MultiFormatRepository(256)...)
	dir := t.TempDir()
	populated(t, hub, dir, "main", cpuImage)
	argv = append([]string{"--model-id=" + testModel, "--port=0", "--prometheus-port=0"}, argv...)
	if !slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--hostname") }) {
		argv = append(argv, "--hostname=127.0.0.1")
	}
	p := start(t, argv, containerEnv(dir, hub.URL, env))
	if p.api == "" {
		t.Fatalf("the stand-in did not start:\n%s%s", p.stdout, p.stderr)
	}
	return p
}

func TestAPIKeyGuardsInfoAndEmbedOnly(t *testing.T) {
	for name, keyed := range map[string]struct {
		argv []string
		env  map[string]string
	}{
		"API_KEY":   {env: map[string]string{"API_KEY": "k3y"}},
		"--api-key": {argv: []string{"--api-key=k3y"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p := serving(t, keyed.argv, keyed.env)
			base := "http://" + p.api

			for _, key := range []string{"", "wrong"} {
				status, _ := get(g, base+"/info", key)
				g.Expect(status).To(Equal(http.StatusUnauthorized))
				status, _ = embed(g, p, key, `{"inputs": "a"}`)
				g.Expect(status).To(Equal(http.StatusUnauthorized))
			}
			status, _ := get(g, base+"/info", "k3y")
			g.Expect(status).To(Equal(http.StatusOK))
			status, _ = embed(g, p, "k3y", `{"inputs": "a"}`)
			g.Expect(status).To(Equal(http.StatusOK))
			for _, public := range []string{base + "/health", base + "/metrics", "http://" + p.prom + "/metrics"} {
				status, _ := get(g, public, "")
				g.Expect(status).To(Equal(http.StatusOK), public)
			}
		})
	}
}

func TestEmbedAnswersDeterministicVectors(t *testing.T) {
	g := NewWithT(t)
	p := serving(t, nil, nil)

	status, body := embed(g, p, "", `{"inputs": ["a", "b"]}`)
	g.Expect(status).To(Equal(http.StatusOK), body)
	var batch [][]float64
	g.Expect(json.Unmarshal([]byte(body), &batch)).To(Succeed())
	g.Expect(batch).To(HaveLen(2))
	g.Expect(batch[0]).To(HaveLen(384), "hidden_size of config.json")
	g.Expect(batch[0]).NotTo(Equal(batch[1]))

	status, body = embed(g, p, "", `{"inputs": "a"}`)
	g.Expect(status).To(Equal(http.StatusOK))
	var single [][]float64
	g.Expect(json.Unmarshal([]byte(body), &single)).To(Succeed())
	g.Expect(single).To(Equal(batch[:1]), "the same text, the same vector")

	status, body = embed(g, p, "", `{"inputs": []}`)
	g.Expect(status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(body).To(ContainSubstring("`inputs` cannot be empty"))
}

// With its backend dead the router keeps its port: /health answers 503,
// /embed 424, /info and /metrics 200.
func TestADeadBackendKeepsThePortOpen(t *testing.T) {
	g := NewWithT(t)
	p := serving(t, nil, map[string]string{BackendDiesAtVariable: "1"})
	base := "http://" + p.api
	status, _ := get(g, base+"/health", "")
	g.Expect(status).To(Equal(http.StatusOK), "alive until its first batch")

	status, body := embed(g, p, "", `{"inputs": "a"}`)
	g.Expect(status).To(Equal(http.StatusFailedDependency))
	g.Expect(body).To(ContainSubstring(`"error_type":"Backend"`))
	status, _ = get(g, base+"/health", "")
	g.Expect(status).To(Equal(http.StatusServiceUnavailable))
	for _, open := range []string{base + "/info", base + "/metrics"} {
		status, _ = get(g, open, "")
		g.Expect(status).To(Equal(http.StatusOK), open)
	}
	_, body = get(g, base+"/metrics", "")
	g.Expect(body).To(ContainSubstring(`te_request_failure{err="backend"} 1`))
}

func TestMetricsAreServedOnBothPorts(t *testing.T) {
	g := NewWithT(t)
	p := serving(t, nil, nil)
	status, _ := embed(g, p, "", `{"inputs": ["a", "b"]}`)
	g.Expect(status).To(Equal(http.StatusOK))

	for _, addr := range []string{p.api, p.prom} {
		status, body := get(g, "http://"+addr+"/metrics", "")
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(body).To(ContainSubstring(`te_request_count{method="batch"} 1`))
		g.Expect(body).To(ContainSubstring(`te_embed_success 2`))
		g.Expect(body).To(ContainSubstring(`te_batch_next_size_count 1`))
		g.Expect(body).To(ContainSubstring(`te_request_queue_duration_count 1`))
		g.Expect(body).To(ContainSubstring(`te_request_inference_duration_count 1`))
		g.Expect(body).To(ContainSubstring(`te_queue_size 0`))
	}
}

func TestJSONOutputLogsJSONLines(t *testing.T) {
	for name, jsonOutput := range map[string]struct {
		argv []string
		env  map[string]string
	}{
		"the image's CMD": {argv: []string{"--json-output"}},
		"JSON_OUTPUT":     {env: map[string]string{"JSON_OUTPUT": "true"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p := serving(t, jsonOutput.argv, jsonOutput.env)
			lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
			g.Expect(lines).NotTo(BeEmpty())
			for _, line := range lines {
				var entry map[string]any
				g.Expect(json.Unmarshal([]byte(line), &entry)).To(Succeed(), line)
				g.Expect(entry).To(HaveKey("timestamp"))
				g.Expect(entry).To(HaveKey("level"))
				g.Expect(entry).To(HaveKey("message"))
			}
		})
	}
	g := NewWithT(t)
	p := serving(t, nil, nil)
	g.Expect(p.stdout.String()).NotTo(HavePrefix("{"), "text lines without the flag")
}

func TestListensWhereTheHostnameSays(t *testing.T) {
	g := NewWithT(t)
	// HOSTNAME is the pod's name: not an address, so TEI listens on 0.0.0.0.
	p := serving(t, []string{"--hostname=server-0"}, nil)
	status, _ := get(g, "http://"+p.api+"/health", "")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(p.stdout.String()).To(ContainSubstring("Invalid hostname, defaulting to 0.0.0.0"))

	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 on this machine: %v", err)
	} else {
		_ = l.Close()
	}
	// "::" (a Service with an IPv6 family) listens on both families.
	p = serving(t, []string{"--hostname=::"}, nil)
	status, _ = get(g, "http://"+p.api+"/health", "")
	g.Expect(status).To(Equal(http.StatusOK), "IPv4 reaches the IPv6 wildcard")
}
