package audit

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
)

// server is an EmbeddingServer fixture of the model org/model: a
// PerReplica 10Gi cache unless edited.
func server(namespace, name string, edits ...func(*embedopsv1.EmbeddingServer)) *embedopsv1.EmbeddingServer {
	s := fixtures.EmbeddingServer(namespace, name, fixtures.WithModel("org/model", ""))
	for _, edit := range edits {
		edit(s)
	}
	return s
}

func shared(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Mode = embedopsv1.CacheModeShared }

func sized(size string) func(*embedopsv1.EmbeddingServer) {
	return func(s *embedopsv1.EmbeddingServer) {
		q := resource.MustParse(size)
		s.Spec.Cache.Size = &q
	}
}

func otherModel(s *embedopsv1.EmbeddingServer) { s.Spec.Model.Name = "org/other" }

func noCache(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Mode = embedopsv1.CacheModeNone }

func badMode(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Mode = "Sometimes" }

func TestMatchServerPicksTheBindingsServer(t *testing.T) {
	perReplica := bindingFor(t, server("ns", "a"), "c")
	sharedBinding := bindingFor(t, server("ns", "a", shared), "c")
	referenced := bindingFor(t, server("ns", "a", shared), "c")
	referenced.Status.RequestReferences = []embedopsv1.RequestReference{{Kind: embedopsv1.EmbeddingServerKind, Namespace: "ns", Name: "b", UID: "1"}}
	cases := []struct {
		name     string
		binding  *embedopsv1.ModelCacheBinding
		servers  []*embedopsv1.EmbeddingServer
		want     string
		mode     embedopsv1.CacheMode
		errorMsg string
	}{
		{name: "PerReplica by name", binding: perReplica, servers: []*embedopsv1.EmbeddingServer{server("ns", "b"), server("ns", "a", sized("1Gi"))}, want: "ns/a", mode: embedopsv1.CacheModePerReplica},
		{name: "PerReplica by name, not by namespace", binding: perReplica, servers: []*embedopsv1.EmbeddingServer{server("other", "a")}, errorMsg: `no matching EmbeddingServer for sharing domain "ns/a"`},
		{name: "PerReplica with cache None", binding: perReplica, servers: []*embedopsv1.EmbeddingServer{server("ns", "a", noCache)}, want: "ns/a"},
		{name: "PerReplica with an invalid spec", binding: perReplica, servers: []*embedopsv1.EmbeddingServer{server("ns", "a", badMode)}, errorMsg: "server ns/a: invalid cache spec"},
		{name: "Shared by key", binding: sharedBinding, servers: []*embedopsv1.EmbeddingServer{server("ns", "x", shared, otherModel), server("ns", "y", shared, sized("2Gi"))}, want: "ns/y", mode: embedopsv1.CacheModeShared},
		{name: "Shared prefers the recorded digest", binding: sharedBinding, servers: []*embedopsv1.EmbeddingServer{server("ns", "x", shared, sized("2Gi")), server("ns", "y", shared)}, want: "ns/y", mode: embedopsv1.CacheModeShared},
		{name: "Shared in another namespace", binding: sharedBinding, servers: []*embedopsv1.EmbeddingServer{server("other", "a", shared)}, errorMsg: `sharing domain "ns"`},
		{name: "Shared by request reference after a model change", binding: referenced, servers: []*embedopsv1.EmbeddingServer{server("ns", "b", shared, otherModel)}, want: "ns/b", mode: embedopsv1.CacheModeShared},
		{name: "nothing rendered", binding: perReplica, errorMsg: "no matching EmbeddingServer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := matchServer(tc.servers, tc.binding)
			if tc.errorMsg != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.errorMsg)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.server).To(Equal(tc.want))
			if tc.mode == "" {
				g.Expect(got.decision).To(BeNil())
				return
			}
			g.Expect(got.decision.Decision.Mode).To(Equal(tc.mode))
		})
	}
}
