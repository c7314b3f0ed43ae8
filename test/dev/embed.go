package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// Where the story's embedding request goes.
const (
	// embedServer is the example the story asks for an embedding.
	embedServer = "minimal"
	// preferredLocalPort is the port-forward's local port when it is free.
	preferredLocalPort = 8080
	// embedBody is the request, as TEI's README shows it.
	embedBody = `{"inputs":"hello"}`
	// forwardTimeout bounds the port-forward's start and the request.
	forwardTimeout = time.Minute
)

// embedding is what the story's request answered.
type embedding struct {
	// vectors are the embeddings, one per input.
	vectors [][]float64
	// commands are what a newcomer runs to ask again.
	commands []string
}

// embed asks the server for an embedding as a newcomer would: kubectl
// port-forward to its Service, then POST /embed on the local port.
func (e *env) embed(ctx context.Context, server string) (*embedding, error) {
	kubectl, err := kubectlBinary()
	if err != nil {
		return nil, err
	}
	servicePort, err := e.servicePort(ctx, server)
	if err != nil {
		return nil, err
	}
	local := localPort()
	forward := []string{"--kubeconfig", e.st.Kubeconfig, "-n", e.st.Namespace, "port-forward", "svc/" + server, fmt.Sprintf("%d:%d", local, servicePort)}
	curl := fmt.Sprintf(`curl -s localhost:%d/embed -H 'Content-Type: application/json' -d '%s'`, local, embedBody)
	result := &embedding{commands: []string{kubectl + " " + strings.Join(forward, " ") + " &", curl}}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	stop, err := portForward(ctx, kubectl, forward)
	if err != nil {
		return nil, err
	}
	defer stop()
	result.vectors, err = postEmbed(ctx, fmt.Sprintf("http://127.0.0.1:%d/embed", local))
	return result, err
}

// kubectlBinary is ./bin/kubectl.
func kubectlBinary() (string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	return harness.Binary(root, "kubectl")
}

// servicePort is the HTTP port of the server's Service.
func (e *env) servicePort(ctx context.Context, server string) (int32, error) {
	service := &corev1.Service{}
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.st.Namespace, Name: server}, service); err != nil {
		return 0, fmt.Errorf("reading the %s Service: %w", server, err)
	}
	if len(service.Spec.Ports) == 0 {
		return 0, fmt.Errorf("the %s Service has no port", server)
	}
	return service.Spec.Ports[0].Port, nil
}

// localPort is preferredLocalPort when it is free on 127.0.0.1, else a
// free one.
func localPort() int {
	for _, port := range []int{preferredLocalPort, 0} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		return port
	}
	return preferredLocalPort
}

// portForward runs kubectl with args until stop is called, once it says it
// is forwarding.
func portForward(ctx context.Context, kubectl string, args []string) (stop func(), err error) {
	cmd := exec.CommandContext(ctx, kubectl, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kubectl port-forward: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "Forwarding from") {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return stop, nil
		}
	}
	stop()
	return nil, fmt.Errorf("kubectl port-forward ended before forwarding: %s", strings.TrimSpace(stderr.String()))
}

// postEmbed sends embedBody to url and decodes TEI's answer: one vector of
// floats per input.
func postEmbed(ctx context.Context, url string) ([][]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(embedBody))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking for an embedding: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST /embed answered %s: %s", resp.Status, body)
	}
	var vectors [][]float64
	if err := json.Unmarshal(body, &vectors); err != nil {
		return nil, fmt.Errorf("POST /embed answered %q: %w", body, err)
	}
	if len(vectors) != 1 || len(vectors[0]) == 0 {
		return nil, errors.New("POST /embed answered no embedding for one input")
	}
	return vectors, nil
}

// showEmbedding asks minimal for an embedding and prints how to ask again.
func (e *env) showEmbedding(ctx context.Context) error {
	result, err := e.embed(ctx, embedServer)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "\n$ %s\n$ %s\n", result.commands[0], result.commands[1])
	v := result.vectors[0]
	fmt.Fprintf(e.out, "[[%.4f, %.4f, %.4f, ...]]   (%d embedding of %d floats, from the TEI stand-in in pod %s-0)\n",
		v[0], v[min(1, len(v)-1)], v[min(2, len(v)-1)], len(result.vectors), len(v), embedServer)
	return nil
}
