package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/test/harness"
)

// testTimeout bounds each wait of the test, generous for 2 busy cores.
const testTimeout = 5 * time.Minute

// TestDevTellsTheWholeStory runs what `make dev` and `make dev-change` run,
// without holding, on a real node where the machine can run one: Flux
// applies the seeded examples, every binding records method Flux and the
// seeded commit and audits Verified, and minimal answers /embed through
// kubectl port-forward; a change moves minimal to a new binding at the new
// commit and releases the old one; stopping removes everything, and a
// second run right after, on the kwok cluster make dev falls back to and
// with -gitops=argocd, tells the same story with Argo CD.
func TestDevTellsTheWholeStory(t *testing.T) {
	opts := testOptions(t)
	e := startTestEnv(t, opts)
	if harness.NodeUnsupported() == "" {
		NewWithT(t).Expect(e.node).NotTo(BeNil(), "this machine runs real pods")
	}
	tellStory(t, e, embedopsv1.SourceFlux)
	step(t, "stopping removes the state", func(t *testing.T) {
		g := NewWithT(t)
		var nodeDir string
		if e.node != nil {
			nodeDir = e.node.Dir
		}
		g.Expect(e.stop()).To(Succeed())
		g.Expect(e.st.Dir).NotTo(BeADirectory())
		g.Expect(opts.stateFile).NotTo(BeAnExistingFile())
		if nodeDir != "" {
			g.Expect(nodeDir).NotTo(BeAnExistingFile(), "the node's Stop tore it down")
		}
	})
	// The kwok path make dev falls back to, without a second real node.
	kwok := opts
	kwok.node, kwok.gitops = nodeKwok, gitopsArgoCD
	again := startTestEnv(t, kwok)
	NewWithT(t).Expect(again.node).To(BeNil())
	tellStory(t, again, embedopsv1.SourceArgoCD)
}

// tellStory checks the story of a started env: every server Ready, every
// binding recording method and the seeded commit and audited Verified, an
// embedding on a real node, and a change.
func tellStory(t *testing.T, e *env, method embedopsv1.SourceMethod) {
	t.Helper()
	s, err := newSession(&logWriter{t: t}, &e.st)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	tool := string(method)
	step(t, tool+": every server is Ready and every binding records the tool and the seeded commit", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(e.show(t.Context(), s)).To(Succeed())
		bindings := &embedopsv1.ModelCacheBindingList{}
		g.Expect(s.client.List(t.Context(), bindings, client.InNamespace(e.opts.namespace))).To(Succeed())
		g.Expect(bindings.Items).To(HaveLen(3), "minimal, shared-cache and advanced each have a cache")
		for _, b := range bindings.Items {
			expectSource(g, method, &b, e.repo.URL, e.seed)
		}
		if e.node != nil {
			result, err := e.embed(t.Context(), embedServer)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(result.vectors).To(HaveLen(1))
			g.Expect(result.commands[0]).To(ContainSubstring("port-forward svc/" + embedServer))
		}
	})
	step(t, tool+": audit -A verifies every binding at the seeded commit", func(t *testing.T) {
		results := auditJSON(t, s)
		NewWithT(t).Expect(results).To(HaveLen(3))
		for _, r := range results {
			expectVerified(NewWithT(t), r, e.seed, seedSubject)
		}
	})
	step(t, tool+": a change moves minimal to a new binding and releases the old one", func(t *testing.T) {
		g := NewWithT(t)
		result, err := s.change(t.Context(), testTimeout)
		g.Expect(err).NotTo(HaveOccurred())
		old, updated := binding(t, s, result.oldBinding), binding(t, s, result.newBinding)
		g.Expect(old.Status.Phase).To(Equal(embedopsv1.BindingReleased))
		expectSource(g, method, old, e.repo.URL, e.seed)
		g.Expect(updated.Status.Phase).To(Equal(embedopsv1.BindingActive))
		g.Expect(updated.Spec.Decision.StorageClassName).To(Equal(fastStorageClass))
		expectSource(g, method, updated, e.repo.URL, result.commit)
		results := auditJSON(t, s, result.oldBinding, result.newBinding)
		g.Expect(results).To(HaveLen(2))
		expectVerified(g, results[0], e.seed, seedSubject)
		expectVerified(g, results[1], result.commit, "Move the minimal cache to the fast storage class")
	})
}

// testOptions builds the controller and points the state file into the
// test's directory.
func testOptions(t *testing.T) options {
	t.Helper()
	dir := t.TempDir()
	controller, err := harness.BuildController(dir)
	if err != nil {
		t.Fatal(err)
	}
	return options{
		examples:   filepath.Join("..", "..", "examples"),
		namespace:  "default",
		stateFile:  filepath.Join(dir, "state.json"),
		controller: controller,
		timeout:    testTimeout,
		node:       nodeAuto,
	}
}

// startTestEnv starts everything, stopping it when the test ends.
func startTestEnv(t *testing.T, opts options) *env {
	t.Helper()
	e, err := startEnv(t.Context(), &logWriter{t: t}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// expectSource checks that the binding was decided by the GitOps tool of
// method at commit of the dev repository's examples, as that tool records
// it.
func expectSource(g Gomega, method embedopsv1.SourceMethod, b *embedopsv1.ModelCacheBinding, url, commit string) {
	source := b.Spec.Source
	g.Expect(source.Method).To(Equal(method), b.Name)
	g.Expect(source.Commit).To(Equal(commit), b.Name)
	g.Expect(source.Repository).To(Equal(url), b.Name)
	g.Expect(source.ObjectRef).NotTo(BeNil(), b.Name)
	switch method {
	case embedopsv1.SourceFlux:
		g.Expect(source.Revision).To(Equal(fluxRevision(commit)), b.Name)
		g.Expect(source.Path).To(Equal("./"+examplesPath), b.Name)
		g.Expect(source.ObjectRef.Kind).To(Equal("Kustomization"), b.Name)
		g.Expect(source.ObjectRef.Name).To(Equal(kustomizationName), b.Name)
	case embedopsv1.SourceArgoCD:
		// Argo CD's status.sync.revision is the commit itself.
		g.Expect(source.Revision).To(Equal(commit), b.Name)
		g.Expect(source.Path).To(Equal(examplesPath), b.Name)
		g.Expect(source.ObjectRef.Kind).To(Equal(applicationGVK.Kind), b.Name)
		g.Expect(source.ObjectRef.Namespace).To(Equal(harness.ArgoCDNamespace), b.Name)
		g.Expect(source.ObjectRef.Name).To(Equal(applicationName), b.Name)
	}
}

// expectVerified checks an audit result: Verified at commit, which is also
// the origin, with its author and subject.
func expectVerified(g Gomega, r audit.Result, commit, subject string) {
	g.Expect(r.Result).To(Equal(audit.Verified), "%s: %s %v", r.Binding, r.Reason, r.Differences)
	g.Expect(r.RecordedCommit).To(Equal(commit), r.Binding)
	g.Expect(r.OriginCommit).To(Equal(commit), r.Binding)
	g.Expect(r.OriginAuthor).To(Equal(author()), r.Binding)
	g.Expect(r.OriginSubject).To(Equal(subject), r.Binding)
}

// auditJSON runs the audit dev runs, as JSON.
func auditJSON(t *testing.T, s *session, names ...string) []audit.Result {
	t.Helper()
	out, err := s.audit(t.Context(), "json", names...)
	if err != nil {
		t.Fatal(err)
	}
	var results []audit.Result
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("decoding the audit: %v\n%s", err, out)
	}
	return results
}

// binding reads a binding of the dev namespace.
func binding(t *testing.T, s *session, name string) *embedopsv1.ModelCacheBinding {
	t.Helper()
	b := &embedopsv1.ModelCacheBinding{}
	if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: s.st.Namespace, Name: name}, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// step runs f as a subtest and stops the test when it fails: each step
// builds on what the previous one left.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// logWriter sends dev's output to the test log.
type logWriter struct {
	t   *testing.T
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.t.Log(line[:len(line)-1])
	}
}
