package bench

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCountRequests(t *testing.T) {
	g := NewWithT(t)
	log := `{"stage":"ResponseComplete","verb":"patch","userAgent":"embedops/bench","requestURI":"/apis/apps/v1/namespaces/a/statefulsets/s?fieldManager=x","objectRef":{"resource":"statefulsets","namespace":"a"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"patch","userAgent":"embedops/bench","requestURI":"/apis/apps/v1/namespaces/a/statefulsets/s?dryRun=All","objectRef":{"resource":"statefulsets"}}
{"stage":"ResponseComplete","verb":"get","userAgent":"embedops/bench","requestURI":"/apis/apps/v1/namespaces/a/statefulsets/s","objectRef":{"resource":"statefulsets"}}
{"stage":"ResponseComplete","verb":"patch","userAgent":"embedops/bench","requestURI":"/apis/embedops.dev/v1alpha1/namespaces/a/embeddingservers/s/status","objectRef":{"resource":"embeddingservers","subresource":"status"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"update","userAgent":"embedops/bench","requestURI":"/apis/embedops.dev/v1alpha1/namespaces/a/modelcachebindings/b/status","objectRef":{"resource":"modelcachebindings","subresource":"status"},"responseStatus":{"code":409}}
{"stage":"ResponseComplete","verb":"update","userAgent":"kube-controller-manager/v1.37.2","requestURI":"/apis/apps/v1/namespaces/a/statefulsets/s/status","objectRef":{"resource":"statefulsets","subresource":"status"}}
{"stage":"ResponseComplete","verb":"get","userAgent":"embedops/bench","requestURI":"/healthz"}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	g.Expect(os.WriteFile(path, []byte(log), 0o600)).To(Succeed())
	counts, err := CountRequests(path, "embedops/", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counts.Writes).To(Equal(map[string]int{"statefulsets": 1, "embeddingservers/status": 1}), "dry runs, reads and refused writes are not writes; other clients are not counted")
	g.Expect(counts.Requests).To(Equal(map[string]int{"statefulsets": 3, "embeddingservers/status": 1, "modelcachebindings/status": 1, "(non-resource)": 1}))
	g.Expect(Total(counts.Requests)).To(Equal(6))
}

func TestCountRequestsInANamespace(t *testing.T) {
	g := NewWithT(t)
	log := `{"stage":"ResponseComplete","verb":"patch","userAgent":"embedops/bench","requestURI":"/x","objectRef":{"resource":"statefulsets","namespace":"a"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"delete","userAgent":"embedops/bench","requestURI":"/y","objectRef":{"resource":"statefulsets","namespace":"b"},"responseStatus":{"code":200}}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	g.Expect(os.WriteFile(path, []byte(log), 0o600)).To(Succeed())
	counts, err := CountRequests(path, "embedops/", "a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counts.Writes).To(Equal(map[string]int{"statefulsets": 1}), "writes in another namespace are not counted")
}
