package provenance_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/provenance"
	"github.com/embedops/embedops/test/harness"
)

var decidedAt = metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))

func resolver(reader client.Reader) *provenance.Resolver {
	return &provenance.Resolver{Reader: reader, Now: func() metav1.Time { return decidedAt }}
}

// server returns an EmbeddingServer created in namespace with the given
// labels and annotations.
func server(t *testing.T, c client.Client, namespace string, labels, annotations map[string]string) *embedopsv1.EmbeddingServer {
	t.Helper()
	es := &embedopsv1.EmbeddingServer{
		ObjectMeta: metav1.ObjectMeta{Name: "bge", Namespace: namespace, Labels: labels, Annotations: annotations},
		Spec:       embedopsv1.EmbeddingServerSpec{Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"}},
	}
	NewWithT(t).Expect(c.Create(t.Context(), es)).To(Succeed())
	return es
}

// object builds an unstructured object from apiVersion, kind and content.
func object(apiVersion, kind, namespace, name string, content map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: content}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

func TestResolveDeclared(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	es := server(t, env.Client, namespace, nil, map[string]string{
		embedopsv1.SourceRevisionAnnotation:   "main@sha1:" + sha1Hex,
		embedopsv1.SourceRepositoryAnnotation: "https://git.example/models.git",
		embedopsv1.SourcePathAnnotation:       "clusters/prod",
	})
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	source := res.Source
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(source).To(Equal(embedopsv1.DecisionSource{
		Method: embedopsv1.SourceDeclared, Revision: "main@sha1:" + sha1Hex, Commit: sha1Hex,
		Repository: "https://git.example/models.git", Path: "clusters/prod", DecidedAt: decidedAt,
	}))
}

func TestResolveKeepsAMalformedDeclaredRevision(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	es := server(t, env.Client, namespace, nil, map[string]string{embedopsv1.SourceRevisionAnnotation: "main"})
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(Equal(embedopsv1.InvalidRevisionReason))
	g.Expect(res.Message).To(ContainSubstring(provenance.ErrInvalidRevision.Error()))
	g.Expect(res.Source).To(Equal(embedopsv1.DecisionSource{Method: embedopsv1.SourceDeclared, Revision: "main", DecidedAt: decidedAt}))
}

func TestResolveUnknownWithoutProvenance(t *testing.T) {
	g := NewWithT(t)
	es := server(t, env.Client, harness.Namespace(t, env.Client), nil, nil)
	res, err := resolver(env.Client).Resolve(t.Context(), es)
	source := res.Source
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(Equal(embedopsv1.SourceUnknownReason))
	g.Expect(source).To(Equal(embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown, DecidedAt: decidedAt}))
}
