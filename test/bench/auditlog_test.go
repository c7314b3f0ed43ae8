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

func TestCountRequestsByCause(t *testing.T) {
	g := NewWithT(t)
	log := `{"stage":"ResponseComplete","verb":"patch","userAgent":"embedops/bench","requestURI":"/apis/embedops.dev/v1alpha1/namespaces/a/embeddingservers/s/status","objectRef":{"resource":"embeddingservers","subresource":"status"},"responseStatus":{"code":200},"requestObject":{"metadata":{"resourceVersion":"7"},"status":{"phase":"Ready","conditions":[{"type":"Accepted","status":"True","reason":"Valid"},{"type":"Ready","status":"True","reason":"Available"}]}}}
{"stage":"ResponseComplete","verb":"patch","userAgent":"embedops/bench","requestURI":"/apis/embedops.dev/v1alpha1/namespaces/a/embeddingservers/s/status","objectRef":{"resource":"embeddingservers","subresource":"status"},"responseStatus":{"code":409},"requestObject":{"status":{"lastHandledReconcileAt":"x"}}}
{"stage":"ResponseComplete","verb":"patch","userAgent":"embedops/bench","requestURI":"/apis/apps/v1/namespaces/a/statefulsets/s?dryRun=All","objectRef":{"resource":"statefulsets"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"get","userAgent":"embedops/bench","requestURI":"/apis/apps/v1/namespaces/a/statefulsets/s","objectRef":{"resource":"statefulsets"},"responseStatus":{"code":404}}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	g.Expect(os.WriteFile(path, []byte(log), 0o600)).To(Succeed())
	counts, err := CountRequests(path, "embedops/", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(counts.Causes).To(Equal(map[string]CauseCount{
		"patch embeddingservers/status: Ready=True Available":                {Requests: 1, Writes: 1},
		"patch embeddingservers/status (409): fields lastHandledReconcileAt": {Requests: 1},
		"patch statefulsets (dry run)":                                       {Requests: 1},
		"get statefulsets (404)":                                             {Requests: 1},
	}))
}

func TestStatusObservation(t *testing.T) {
	g := NewWithT(t)
	g.Expect(statusObservation([]byte(`{"status":{"conditions":[{"type":"Reconciling","status":"True","reason":"Progressing"}],"phase":"Pending"}}`))).
		To(Equal("Reconciling=True Progressing"), "without Ready, the first condition")
	g.Expect(statusObservation([]byte(`{"status":{"lastHandledReconcileAt":"x","observedGeneration":2}}`))).
		To(Equal("fields lastHandledReconcileAt,observedGeneration"))
	g.Expect(statusObservation([]byte(`{"metadata":{}}`))).To(Equal("no status"))
}
