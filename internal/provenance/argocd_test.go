package provenance_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/provenance"
	"github.com/embedops/embedops/test/harness"
)

// application creates an Argo CD Application with the given status.
func application(t *testing.T, c client.Client, namespace, name string, status map[string]any) {
	t.Helper()
	app := object("argoproj.io/v1alpha1", "Application", namespace, name, map[string]any{
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
			application(t, env.Client, appNamespace, "models", tc.status)
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
	application(t, env.Client, namespace, "models", map[string]any{"sync": map[string]any{"revision": sha1Hex, "status": "Synced"}})
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
