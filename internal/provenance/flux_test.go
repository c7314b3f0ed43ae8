package provenance_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/provenance"
	"github.com/embedops/embedops/test/harness"
)

const repoURL = "http://127.0.0.1:9999/models.git"

// fluxFixture creates a GitRepository and a Kustomization named "apps" and
// sets the Kustomization's status.
func fluxFixture(t *testing.T, c client.Client, namespace string, status map[string]any) {
	t.Helper()
	g := NewWithT(t)
	repo := object("source.toolkit.fluxcd.io/v1", "GitRepository", namespace, "models", map[string]any{
		"spec": map[string]any{"interval": "1m", "url": repoURL},
	})
	g.Expect(c.Create(t.Context(), repo)).To(Succeed())
	ks := object("kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace, "apps", map[string]any{
		"spec": map[string]any{"interval": "1m", "path": "./clusters/dev", "prune": true,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "models"}},
	})
	g.Expect(c.Create(t.Context(), ks)).To(Succeed())
	ks.Object["status"] = status
	g.Expect(c.Status().Update(t.Context(), ks)).To(Succeed())
}

func fluxLabels(namespace string) map[string]string {
	return map[string]string{provenance.FluxNameLabel: "apps", provenance.FluxNamespaceLabel: namespace}
}

func inventory(namespace string) map[string]any {
	return map[string]any{"entries": []any{
		map[string]any{"id": namespace + "_bge_embedops.dev_EmbeddingServer", "v": "v1alpha1"},
	}}
}

func TestResolveFlux(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	revision := "main@sha1:" + sha1Hex
	fluxFixture(t, env.Client, namespace, map[string]any{
		"lastAttemptedRevision": revision, "lastAppliedRevision": revision, "inventory": inventory(namespace),
	})
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)

	res, err := resolver(env.Client).Resolve(t.Context(), es)
	source := res.Source
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(BeEmpty(), res.Message)
	g.Expect(source).To(Equal(embedopsv1.DecisionSource{
		Method: embedopsv1.SourceFlux, Revision: revision, Commit: sha1Hex, Repository: repoURL, Path: "./clusters/dev",
		ObjectRef: &embedopsv1.SourceObjectReference{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: namespace, Name: "apps"},
		Render:    &embedopsv1.RenderInputs{Spec: `{"path":"./clusters/dev"}`},
		DecidedAt: decidedAt,
	}))
}

func TestResolveFluxTakesTheRevisionBeingApplied(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	newer := "main@sha1:" + sha1Hex
	fluxFixture(t, env.Client, namespace, map[string]any{
		"lastAttemptedRevision": newer, "lastAppliedRevision": "main@sha1:" + strings.Repeat("1", 40),
		"inventory": inventory(namespace),
	})
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	source := res.Source
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(source.Revision).To(Equal(newer), "lastAttemptedRevision is set before apply")
}

// TestResolveFluxRecordsTheRevisionBeingFirstApplied: the first apply has
// not listed the server yet; what is being applied is recorded, never
// waited for.
func TestResolveFluxRecordsTheRevisionBeingFirstApplied(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	fluxFixture(t, env.Client, namespace, map[string]any{"lastAttemptedRevision": "main@sha1:" + sha1Hex})
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(Equal(embedopsv1.SourcePendingReason))
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(res.Source.Commit).To(Equal(sha1Hex))
}

// TestResolveFluxKeepsAnUnparsableRevision records the revision as written,
// with no commit: the server keeps serving.
func TestResolveFluxKeepsAnUnparsableRevision(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	fluxFixture(t, env.Client, namespace, map[string]any{
		"lastAttemptedRevision": "main@md5:abc", "lastAppliedRevision": "main@md5:abc", "inventory": inventory(namespace),
	})
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(Equal(embedopsv1.InvalidRevisionReason))
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(res.Source.Revision).To(Equal("main@md5:abc"))
	g.Expect(res.Source.Commit).To(BeEmpty())
}

func TestResolveFluxIgnoresCopiedLabels(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	revision := "main@sha1:" + sha1Hex
	fluxFixture(t, env.Client, namespace, map[string]any{"lastAttemptedRevision": revision, "lastAppliedRevision": revision})
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	source := res.Source
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(source.Method).To(Equal(embedopsv1.SourceUnknown), "an applied Kustomization whose inventory lacks the object did not apply it")
}

// TestResolveFluxRecordsSubstitutionSources records the versions of the
// ConfigMaps and Secrets a post-build substitution reads, never a value.
func TestResolveFluxRecordsSubstitutionSources(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	revision := "main@sha1:" + sha1Hex
	vars := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "vars"}, Data: map[string]string{"CLASS": "fast"}}
	g.Expect(env.Client.Create(t.Context(), vars)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "token"}, StringData: map[string]string{"TOKEN": "s3cr3t-value"}}
	g.Expect(env.Client.Create(t.Context(), secret)).To(Succeed())
	fluxFixture(t, env.Client, namespace, map[string]any{
		"lastAttemptedRevision": revision, "lastAppliedRevision": revision, "inventory": inventory(namespace),
	})
	ks := object("kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace, "apps", nil)
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(ks), ks)).To(Succeed())
	g.Expect(unstructured.SetNestedField(ks.Object, map[string]any{
		"substitute": map[string]any{"REGION": "eu"},
		"substituteFrom": []any{
			map[string]any{"kind": "ConfigMap", "name": "vars"},
			map[string]any{"kind": "Secret", "name": "token"},
			map[string]any{"kind": "ConfigMap", "name": "absent", "optional": true},
		},
	}, "spec", "postBuild")).To(Succeed())
	g.Expect(unstructured.SetNestedField(ks.Object, "team", "spec", "targetNamespace")).To(Succeed())
	g.Expect(env.Client.Update(t.Context(), ks)).To(Succeed())
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)

	res, err := resolver(env.Client).Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	render := res.Source.Render
	g.Expect(render.SubstituteFrom).To(Equal([]embedopsv1.SubstitutionSource{
		{Kind: "ConfigMap", Name: "vars", ResourceVersion: vars.ResourceVersion},
		{Kind: "Secret", Name: "token", ResourceVersion: secret.ResourceVersion},
		{Kind: "ConfigMap", Name: "absent", Optional: true},
	}))
	g.Expect(render.Spec).To(ContainSubstring(`"targetNamespace":"team"`))
	g.Expect(render.Spec).To(ContainSubstring(`"REGION":"eu"`))
	g.Expect(render.Spec).NotTo(ContainSubstring("interval"), "what does not change the render is not recorded")
	g.Expect(render.Spec + render.SubstituteFrom[1].ResourceVersion).NotTo(ContainSubstring("s3cr3t"))
}

// TestResolveFluxWinsOverAStaleDeclaredRevision: a hard-coded annotation
// is not what was applied; the Kustomization's revision is recorded and
// the disagreement said.
func TestResolveFluxWinsOverAStaleDeclaredRevision(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	applied := "main@sha1:" + sha1Hex
	fluxFixture(t, env.Client, namespace, map[string]any{
		"lastAttemptedRevision": applied, "lastAppliedRevision": applied, "inventory": inventory(namespace),
	})
	stale := "main@sha1:" + strings.Repeat("1", 40)
	es := server(t, env.Client, namespace, fluxLabels(namespace), map[string]string{embedopsv1.SourceRevisionAnnotation: stale})

	res, err := resolver(env.Client).Resolve(t.Context(), es)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(BeEmpty(), res.Message)
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(res.Source.Commit).To(Equal(sha1Hex))
	g.Expect(res.Disagreement).To(ContainSubstring(stale))
	g.Expect(res.Disagreement).To(ContainSubstring(applied))
}

// TestResolveDeclaredRevisionThatAgreesIsQuiet: the same commit, declared
// and applied, is no disagreement.
func TestResolveDeclaredRevisionThatAgreesIsQuiet(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	applied := "main@sha1:" + sha1Hex
	fluxFixture(t, env.Client, namespace, map[string]any{
		"lastAttemptedRevision": applied, "lastAppliedRevision": applied, "inventory": inventory(namespace),
	})
	es := server(t, env.Client, namespace, fluxLabels(namespace), map[string]string{embedopsv1.SourceRevisionAnnotation: sha1Hex})

	res, err := resolver(env.Client).Resolve(t.Context(), es)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(res.Disagreement).To(BeEmpty())
}

// TestResolveDeclaredFillsInWhereFluxKnowsNoCommit: a Kustomization whose
// revision is no git commit (an OCI artifact's digest) leaves the
// declared revision to be recorded.
func TestResolveDeclaredFillsInWhereFluxKnowsNoCommit(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	artifact := "latest@sha256:" + strings.Repeat("a", 64)
	fluxFixture(t, env.Client, namespace, map[string]any{
		"lastAttemptedRevision": artifact, "lastAppliedRevision": artifact, "inventory": inventory(namespace),
	})
	es := server(t, env.Client, namespace, fluxLabels(namespace), map[string]string{embedopsv1.SourceRevisionAnnotation: "main@sha1:" + sha1Hex})

	res, err := resolver(env.Client).Resolve(t.Context(), es)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(BeEmpty(), res.Message)
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceDeclared))
	g.Expect(res.Source.Commit).To(Equal(sha1Hex))
}
