package chart

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/embedops/embedops/internal/kubeversion"
)

// TestKubeVersion: the chart's kubeVersion is the controller's floor
// (kubeversion.Floor), so Helm installs it on the floor, on its
// pre-releases and on the newest Kubernetes tested, and refuses the minor
// below, as the controller would at start.
func TestKubeVersion(t *testing.T) {
	g := NewWithT(t)
	c, err := Load(diskFS(), chartDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Metadata.KubeVersion).To(Equal(">=" + kubeversion.Floor + ".0-0"))
	floor := version.MustParseMajorMinor(kubeversion.Floor)
	below := fmt.Sprintf("v%d.%d.14", floor.Major(), floor.Minor()-1)
	for kubeVersion, installs := range map[string]bool{
		"v" + kubeversion.Floor + ".0":         true,
		"v" + kubeversion.Floor + ".0-gke.100": true,
		"v1.37.2":                              true,
		below:                                  false,
		below + "+k3s1":                        false,
	} {
		_, err := Render(c, Release{Name: "embedops", Namespace: namespace, KubeVersion: kubeVersion})
		if installs {
			g.Expect(err).NotTo(HaveOccurred(), kubeVersion)
			continue
		}
		g.Expect(err).To(MatchError(ContainSubstring("chart requires kubeVersion")), kubeVersion)
	}
}
