package provenance_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/provenance"
)

func TestParseTrackingID(t *testing.T) {
	cases := []struct {
		in   string
		want provenance.TrackingID
	}{
		{"models:embedops.dev/EmbeddingServer:team-a/bge",
			provenance.TrackingID{AppName: "models", Group: "embedops.dev", Kind: "EmbeddingServer", Namespace: "team-a", Name: "bge"}},
		{"apps_models:embedops.dev/EmbeddingServer:team-a/bge",
			provenance.TrackingID{AppNamespace: "apps", AppName: "models", Group: "embedops.dev", Kind: "EmbeddingServer", Namespace: "team-a", Name: "bge"}},
		{"models:/Service:default/bge",
			provenance.TrackingID{AppName: "models", Kind: "Service", Namespace: "default", Name: "bge"}},
		{"models:rbac.authorization.k8s.io/ClusterRole:/reader",
			provenance.TrackingID{AppName: "models", Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "reader"}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			id, err := provenance.ParseTrackingID(tc.in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id).To(Equal(tc.want))
			g.Expect(id.String()).To(Equal(tc.in))
		})
	}
}

func TestParseTrackingIDRefusesMalformed(t *testing.T) {
	for _, in := range []string{"", "models", "models:EmbeddingServer:ns/n", ":embedops.dev/EmbeddingServer:ns/n",
		"models:embedops.dev/:ns/n", "models:embedops.dev/EmbeddingServer:ns", "models:embedops.dev/EmbeddingServer:ns/",
		"_models:embedops.dev/EmbeddingServer:ns/n", "apps_:embedops.dev/EmbeddingServer:ns/n"} {
		t.Run(in, func(t *testing.T) {
			_, err := provenance.ParseTrackingID(in)
			NewWithT(t).Expect(err).To(MatchError(provenance.ErrInvalidTrackingID))
		})
	}
}

// FuzzParseTrackingID checks that parsing never panics and that a parsed id
// formats back to its input.
func FuzzParseTrackingID(f *testing.F) {
	for _, seed := range []string{"a:g/K:ns/n", "ns_a:/K:ns/n", "a:g/K:/n", "::", "a_b_c:g/K:n/n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, err := provenance.ParseTrackingID(in)
		if err != nil {
			return
		}
		if id.String() != in {
			t.Fatalf("%q parsed to %+v, which formats as %q", in, id, id.String())
		}
	})
}
