package main

import (
	"bytes"
	"context"
	"maps"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
	"github.com/embedops/embedops/internal/tei"
)

// testModel is the model the tests serve.
const testModel = "org/embed"

// Images by the backends they run, without a registry: populate.BackendsOf
// reads the repository's last element and the tag.
const (
	cpuImage  = "text-embeddings-inference:cpu-1.9"
	cudaImage = "text-embeddings-inference:1.9"
)

// process is the stand-in started as the kubelet starts a container: its
// arguments and environment, nothing else.
type process struct {
	api, prom string // host:port of the http and Prometheus listeners
	stdout    *syncBuffer
	stderr    *syncBuffer
	exited    chan int
	stop      context.CancelFunc
}

// start runs the stand-in with argv and env until the test ends. It returns
// once the stand-in listens, or has exited.
func start(t *testing.T, argv []string, env map[string]string) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan int, 1), stop: cancel}
	ready := make(chan struct{})
	go func() {
		p.exited <- run(ctx, argv, env, p.stdout, p.stderr, func(api, prom net.Addr) {
			p.api, p.prom = loopback(api), loopback(prom)
			close(ready)
		})
	}()
	t.Cleanup(func() {
		cancel()
		if p.api != "" {
			<-p.exited
		}
	})
	select {
	case <-ready:
	case code := <-p.exited:
		p.exited <- code
	}
	return p
}

// exitCode waits for the stand-in to exit and returns its status.
func (p *process) exitCode() int {
	code := <-p.exited
	p.exited <- code
	return code
}

// loopback is addr's port on 127.0.0.1: tests send traffic there only.
func loopback(addr net.Addr) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(addr.(*net.TCPAddr).Port))
}

// containerEnv is the environment of a TEI container whose cache is dir
// and whose hub is endpoint: the image's, HOSTNAME from the runtime, then
// extra.
func containerEnv(dir, endpoint string, extra map[string]string) map[string]string {
	env := maps.Clone(tei.ImageEnv)
	env["HOSTNAME"] = "server-0"
	env["HUGGINGFACE_HUB_CACHE"] = dir
	env["HF_ENDPOINT"] = endpoint
	maps.Copy(env, extra)
	return env
}

// loopbackArgs listen on 127.0.0.1 on ports the system picks.
var loopbackArgs = []string{"--hostname=127.0.0.1", "--port=0", "--prometheus-port=0"}

// args are the arguments after loopbackArgs.
func args(extra ...string) []string {
	return append(append([]string{}, loopbackArgs...), extra...)
}

// populated fills a cache for image as embedops' populate Job does and
// returns the commit.
func populated(t *testing.T, hub *hubtest.Hub, dir, revision, image string) string {
	t.Helper()
	result, err := populate.Run(context.Background(), populate.Options{
		Model: testModel, Revision: revision, Dir: dir, Endpoint: hub.URL, Image: image, MaxAttempts: 1,
	})
	if err != nil {
		t.Fatalf("populating the cache: %v", err)
	}
	return result.ResolvedCommit
}

// syncBuffer is a buffer the stand-in writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
