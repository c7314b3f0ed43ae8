package controller

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/embedops/embedops/internal/builder"
)

// teiStandIn plays TEI behind every Service address the controller dials.
// It answers as the TEI that the server's StatefulSet starts would, reading
// the StatefulSet named by the address's host ("<name>.<namespace>.svc")
// from the API server at each request, rule by rule:
//
//   - /info reports model_id as --model-id and model_sha as --revision, as
//     given, never resolved (TEI router/src/lib.rs: `model_sha: revision`);
//     a flag absent from the arguments is read from its variable, MODEL_ID
//     or REVISION (router/src/main.rs, `#[clap(long, env)]`).
//   - With an API key (--api-key, else API_KEY, its value from a Secret
//     when the variable says so), /info and /embed answer 401 unless the
//     request carries "Authorization: Bearer <key>" exactly; /health and
//     /metrics stay public (router/src/http/server.rs: the auth layer wraps
//     `routes`, not `public_routes`).
//   - /metrics is also served on the http port (router/src/http/server.rs);
//     the separate PROMETHEUS_PORT listener (router/src/prometheus.rs) is
//     not played.
type teiStandIn struct {
	t      *testing.T
	server *httptest.Server

	mu       sync.Mutex
	down     bool
	startArg map[string]string // flags forced, as a pod started from an older template has
	asked    map[string]string // host+path -> the Authorization header sent
}

// newTEIStandIn starts the stand-in until the test ends.
func newTEIStandIn(t *testing.T) *teiStandIn {
	t.Helper()
	s := &teiStandIn{t: t, startArg: map[string]string{}, asked: map[string]string{}}
	s.server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.server.Close)
	return s
}

// setDown makes every path answer 503, as a TEI whose backend died.
func (s *teiStandIn) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// startedWith makes the stand-in answer as if TEI had been started with
// flag=value whatever the StatefulSet says: a pod of an older template.
func (s *teiStandIn) startedWith(flag, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startArg[flag] = value
}

// askedWith returns the Authorization header of the last request to host+path,
// and whether there was one.
func (s *teiStandIn) askedWith(hostPath string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	auth, ok := s.asked[hostPath]
	return auth, ok
}

func (s *teiStandIn) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.asked[r.Host+r.URL.Path] = r.Header.Get("Authorization")
	down := s.down
	forced := make(map[string]string, len(s.startArg))
	for k, v := range s.startArg {
		forced[k] = v
	}
	s.mu.Unlock()
	if down {
		http.Error(w, "backend is not healthy", http.StatusServiceUnavailable)
		return
	}
	started, err := s.startedFrom(r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range forced {
		started.flags[k] = v
	}
	switch r.URL.Path {
	case "/health", "/metrics":
		w.WriteHeader(http.StatusOK)
	case "/info", "/embed":
		if key, ok := started.lookup("--api-key", "API_KEY"); ok && r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/embed" {
			_, _ = w.Write([]byte("[[0.1]]"))
			return
		}
		s.writeInfo(w, started)
	default:
		http.NotFound(w, r)
	}
}

// writeInfo answers /info as TEI 1.9 does, trimmed.
func (s *teiStandIn) writeInfo(w http.ResponseWriter, started *teiProcess) {
	modelID, _ := started.lookup("--model-id", "MODEL_ID")
	info := map[string]any{"model_id": modelID, "model_sha": nil, "model_dtype": "float32", "max_input_length": 512, "version": "1.9.0"}
	if revision, ok := started.lookup("--revision", "REVISION"); ok {
		info["model_sha"] = revision
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(info)
}

// teiProcess is how TEI was started: its flags and environment.
type teiProcess struct {
	flags map[string]string
	env   map[string]string
}

// lookup returns a flag's value, else its variable's, as clap reads them.
func (p *teiProcess) lookup(flag, variable string) (string, bool) {
	if v, ok := p.flags[flag]; ok {
		return v, true
	}
	v, ok := p.env[variable]
	return v, ok
}

// startedFrom reads the TEI container of the StatefulSet a Service host
// names, resolving Secret references as the kubelet does.
func (s *teiStandIn) startedFrom(host string) (*teiProcess, error) {
	name, rest, _ := strings.Cut(host, ".")
	namespace, _, _ := strings.Cut(rest, ".")
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(s.t.Context(), types.NamespacedName{Namespace: namespace, Name: name}, sts); err != nil {
		return nil, fmt.Errorf("no TEI runs behind %s: %w", host, err)
	}
	var container *corev1.Container
	for i := range sts.Spec.Template.Spec.Containers {
		if sts.Spec.Template.Spec.Containers[i].Name == builder.ContainerName {
			container = &sts.Spec.Template.Spec.Containers[i]
		}
	}
	if container == nil {
		return nil, fmt.Errorf("StatefulSet %s has no TEI container", name)
	}
	p := &teiProcess{flags: map[string]string{}, env: map[string]string{}}
	args := container.Args
	for i := 0; i < len(args); i++ {
		if flag, value, ok := strings.Cut(args[i], "="); ok {
			p.flags[flag] = value
		} else if strings.HasPrefix(args[i], "--") && i+1 < len(args) {
			p.flags[args[i]] = args[i+1]
			i++
		}
	}
	for _, e := range container.Env {
		value, err := s.envValue(namespace, e)
		if err != nil {
			return nil, err
		}
		p.env[e.Name] = value
	}
	return p, nil
}

// envValue is a variable's value, from a Secret when it says so.
func (s *teiStandIn) envValue(namespace string, e corev1.EnvVar) (string, error) {
	if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		return e.Value, nil
	}
	ref := e.ValueFrom.SecretKeyRef
	secret := &corev1.Secret{}
	if err := env.Client.Get(s.t.Context(), types.NamespacedName{Namespace: namespace, Name: ref.Name}, secret); err != nil {
		return "", fmt.Errorf("the pod would not start: %w", err)
	}
	return string(secret.Data[ref.Key]), nil
}
