package endpoint

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestEndpointProberSelectsTheControllersPods(t *testing.T) {
	g := NewWithT(t)
	peer, err := Prober("embedops-system", DefaultProberLabels)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peer.NamespaceSelector.MatchLabels).To(Equal(map[string]string{"kubernetes.io/metadata.name": "embedops-system"}))
	g.Expect(peer.PodSelector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "embedops", "app.kubernetes.io/component": "controller"}))

	peer, err = Prober("", DefaultProberLabels)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peer).To(BeNil(), "outside a cluster no pod asks /info")

	_, err = Prober("embedops-system", "")
	g.Expect(err).To(MatchError(ContainSubstring("would admit every pod")))
	_, err = Prober("embedops-system", "not a label")
	g.Expect(err).To(HaveOccurred())
}
