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

// listing is an Application's status.resources naming the server bge in
// namespace, as Argo CD records what it manages.
func listing(namespace string) []any {
	return []any{map[string]any{"group": "embedops.dev", "kind": "EmbeddingServer", "namespace": namespace, "name": "bge", "version": "v1alpha1"}}
}

// application creates the Argo CD Application "models" with the given
// status.
func application(t *testing.T, c client.Client, namespace string, status map[string]any) {
	t.Helper()
	app := object("argoproj.io/v1alpha1", "Application", namespace, "models", map[string]any{
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": repoURL, "path": "apps/models", "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "models"},
		},
		"status": status,
	})
	NewWithT(t).Expect(c.Create(t.Context(), app)).To(Succeed())
}

func TestResolveArgoCD(t *testing.T) {
	const other = "2222222222222222222222222222222222222222"
	cases := []struct {
		name, appNamespace, trackingPrefix string
		status                             map[string]any
		commit                             string
	}{
		{"operation revision first", "", "models", map[string]any{
			"operationState": map[string]any{
				"operation": map[string]any{"sync": map[string]any{"revision": sha1Hex}},
				"phase":     "Running", "startedAt": "2026-11-30T12:00:00Z",
				"syncResult": map[string]any{"revision": sha1Hex},
			},
			"sync": map[string]any{"revision": other, "status": "Synced"},
		}, sha1Hex},
		{"sync revision otherwise", "", "models", map[string]any{"sync": map[string]any{"revision": other, "status": "Synced"}}, other},
		{"application in any namespace", "apps", "apps_models", map[string]any{"sync": map[string]any{"revision": sha1Hex, "status": "Synced"}}, sha1Hex},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			namespace := harness.Namespace(t, env.Client)
			appNamespace := tc.appNamespace
			if appNamespace == "" {
				appNamespace = harness.Namespace(t, env.Client)
			} else {
				appNamespace = namespace
				tc.trackingPrefix = namespace + "_models"
			}
			tc.status["resources"] = listing(namespace)
			application(t, env.Client, appNamespace, tc.status)
			es := server(t, env.Client, namespace, nil, map[string]string{
				provenance.TrackingIDAnnotation: tc.trackingPrefix + ":embedops.dev/EmbeddingServer:" + namespace + "/bge",
			})
			r := resolver(env.Client)
			r.ArgoCDNamespace = appNamespace
			res, err := r.Resolve(t.Context(), es)
			source := res.Source
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(source.Method).To(Equal(embedopsv1.SourceArgoCD))
			g.Expect(source.Commit).To(Equal(tc.commit))
			g.Expect(source.Repository).To(Equal(repoURL))
			g.Expect(source.Path).To(Equal("apps/models"))
			g.Expect(source.ObjectRef).To(Equal(&embedopsv1.SourceObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Namespace: appNamespace, Name: "models"}))
		})
	}
}

func TestResolveArgoCDIgnoresATrackingIDForAnotherObject(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	application(t, env.Client, namespace, map[string]any{"sync": map[string]any{"revision": sha1Hex, "status": "Synced"}})
	es := server(t, env.Client, namespace, nil, map[string]string{
		provenance.TrackingIDAnnotation: "models:embedops.dev/EmbeddingServer:" + namespace + "/someone-else",
	})
	r := resolver(env.Client)
	r.ArgoCDNamespace = namespace
	res, err := r.Resolve(t.Context(), es)
	source := res.Source
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(source.Method).To(Equal(embedopsv1.SourceUnknown))
}

// TestResolveArgoCDIgnoresATrackingIDOfAnApplicationThatDoesNotListTheServer
// starts from a forged tracking id: a tenant names an Application that
// synced, but not this server. Nothing is attested; the same server listed
// by that Application resolves to it.
func TestResolveArgoCDIgnoresATrackingIDOfAnApplicationThatDoesNotListTheServer(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	application(t, env.Client, namespace, map[string]any{"sync": map[string]any{"revision": sha1Hex, "status": "Synced"}})
	es := server(t, env.Client, namespace, nil, map[string]string{
		provenance.TrackingIDAnnotation: "models:embedops.dev/EmbeddingServer:" + namespace + "/bge",
	})
	r := resolver(env.Client)
	r.ArgoCDNamespace = namespace
	res, err := r.Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceUnknown), "an Application that does not list the server did not sync it")
	g.Expect(res.Source.Commit).To(BeEmpty())

	app := object("argoproj.io/v1alpha1", "Application", namespace, "models", nil)
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(app), app)).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(app.Object, listing(namespace), "status", "resources")).To(Succeed())
	g.Expect(env.Client.Update(t.Context(), app)).To(Succeed())
	res, err = r.Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceArgoCD))
	g.Expect(res.Source.Commit).To(Equal(sha1Hex))
}

// TestResolveWithoutGitOpsCRDs runs against a control plane without the Flux
// and Argo CD CRDs: their labels and annotations lead nowhere, without error.
func TestResolveWithoutGitOpsCRDs(t *testing.T) {
	g := NewWithT(t)
	bare, err := harness.StartEnv(harness.EnvOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = bare.Stop() })
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "models"}}
	g.Expect(bare.Client.Create(t.Context(), namespace)).To(Succeed())

	es := server(t, bare.Client, "models", fluxLabels("models"), map[string]string{
		provenance.TrackingIDAnnotation: "models:embedops.dev/EmbeddingServer:models/bge",
	})
	res, err := resolver(bare.Client).Resolve(t.Context(), es)
	source := res.Source
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(source.Method).To(Equal(embedopsv1.SourceUnknown))
}

// multiSourceApplication creates an Application with a chart, a git path
// and a values ref, synced at revisions.
func multiSourceApplication(t *testing.T, c client.Client, namespace string, sources []any, revisions []any) {
	t.Helper()
	app := object("argoproj.io/v1alpha1", "Application", namespace, "models", map[string]any{
		"spec": map[string]any{
			"project":     "default",
			"sources":     sources,
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "models"},
		},
		"status": map[string]any{"sync": map[string]any{"revisions": revisions, "status": "Synced"}, "resources": listing(namespace)},
	})
	NewWithT(t).Expect(c.Create(t.Context(), app)).To(Succeed())
}

func TestResolveArgoCDMultiSource(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	multiSourceApplication(t, env.Client, namespace, []any{
		map[string]any{"repoURL": repoURL, "path": "charts/bge", "helm": map[string]any{"valueFiles": []any{"$values/env/prod.yaml"}}},
		map[string]any{"repoURL": repoURL, "ref": "values"},
	}, []any{sha1Hex, strings.Repeat("1", 40)})
	es := server(t, env.Client, namespace, nil, map[string]string{
		provenance.TrackingIDAnnotation: namespace + "_models:embedops.dev/EmbeddingServer:" + namespace + "/bge",
	})
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(BeEmpty(), res.Message)
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceArgoCD))
	g.Expect(res.Source.Commit).To(Equal(sha1Hex))
	g.Expect(res.Source.Path).To(Equal("charts/bge"))
	g.Expect(res.Source.Render.Revisions).To(Equal([]string{sha1Hex, strings.Repeat("1", 40)}))
	g.Expect(res.Source.Render.Spec).To(ContainSubstring(`"$values/env/prod.yaml"`))
	g.Expect(res.Source.Render.Spec).To(ContainSubstring(`"destination":{"namespace":"models"}`))
}

func TestResolveArgoCDChartIsNotAGitSource(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	multiSourceApplication(t, env.Client, namespace, []any{
		map[string]any{"repoURL": "https://charts.example.com", "chart": "tei", "targetRevision": "1.2.0"},
	}, []any{"1.2.0"})
	es := server(t, env.Client, namespace, nil, map[string]string{
		provenance.TrackingIDAnnotation: namespace + "_models:embedops.dev/EmbeddingServer:" + namespace + "/bge",
	})
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(Equal(embedopsv1.NotGitSourceReason))
	g.Expect(res.Source).To(HaveField("Method", embedopsv1.SourceArgoCD))
	g.Expect(res.Source).To(HaveField("Chart", "tei"))
	g.Expect(res.Source).To(HaveField("Revision", "1.2.0"))
	g.Expect(res.Source).To(HaveField("Repository", "https://charts.example.com"))
	g.Expect(res.Source.Commit).To(BeEmpty())
}

func TestResolveArgoCDOCISourceIsNotAGitSource(t *testing.T) {
	// Even a revision shaped like a commit names none in a registry.
	for _, revision := range []string{"sha256:" + strings.Repeat("ab", 32), sha1Hex} {
		t.Run(revision, func(t *testing.T) {
			g := NewWithT(t)
			namespace := harness.Namespace(t, env.Client)
			multiSourceApplication(t, env.Client, namespace, []any{
				map[string]any{"repoURL": "oci://registry.example.com/fleet", "path": ".", "targetRevision": "1.0.0"},
			}, []any{revision})
			es := server(t, env.Client, namespace, nil, map[string]string{
				provenance.TrackingIDAnnotation: namespace + "_models:embedops.dev/EmbeddingServer:" + namespace + "/bge",
			})
			res, err := resolver(env.Client).Resolve(t.Context(), es)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Reason).To(Equal(embedopsv1.NotGitSourceReason))
			g.Expect(res.Message).To(ContainSubstring("renders OCI artifact oci://registry.example.com/fleet " + revision + ", not a git source"))
			g.Expect(res.Source).To(HaveField("Method", embedopsv1.SourceArgoCD))
			g.Expect(res.Source).To(HaveField("Repository", "oci://registry.example.com/fleet"))
			g.Expect(res.Source).To(HaveField("Revision", revision))
			g.Expect(res.Source.Commit).To(BeEmpty())
		})
	}
}

func TestResolveArgoCDPendingRecordsWhatIsKnown(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	application(t, env.Client, namespace, map[string]any{})
	es := server(t, env.Client, namespace, nil, map[string]string{
		provenance.TrackingIDAnnotation: namespace + "_models:embedops.dev/EmbeddingServer:" + namespace + "/bge",
	})
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(Equal(embedopsv1.SourcePendingReason))
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceUnknown))
	g.Expect(res.Source.Repository).To(Equal(repoURL))
}

// TestResolveArgoCDLabelTracking follows the instance label, in the
// configured Argo CD namespace, only to an Application that lists the
// server: the label is also Helm's convention.
func TestResolveArgoCDLabelTracking(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	argoNamespace := harness.Namespace(t, env.Client)
	application(t, env.Client, argoNamespace, map[string]any{
		"sync":      map[string]any{"revision": sha1Hex, "status": "Synced"},
		"resources": listing(namespace),
	})
	es := server(t, env.Client, namespace, map[string]string{provenance.InstanceLabel: "models"}, nil)
	r := resolver(env.Client)
	r.ArgoCDNamespace = argoNamespace
	res, err := r.Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceArgoCD))
	g.Expect(res.Source.Commit).To(Equal(sha1Hex))

	other := &embedopsv1.EmbeddingServer{}
	other.Namespace, other.Name, other.Labels = namespace, "other", map[string]string{provenance.InstanceLabel: "models"}
	res, err = r.Resolve(t.Context(), other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceUnknown), "an Application that does not list the server did not sync it")
}
