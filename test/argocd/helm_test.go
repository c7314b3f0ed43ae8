package argocd

import (
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// chartPath is where the Helm test commits its chart.
const chartPath = "charts/server"

// TestArgoCDRendersAHelmChartFromGit syncs a chart kept in git, rendered by
// the real repo-server (helm template), the server's storage class set by a
// parameter of the Application rather than in git: the binding records the
// chart's directory at the synced commit and the class, and the audit
// renders the chart with the same parameter and verifies it.
func TestArgoCDRendersAHelmChartFromGit(t *testing.T) {
	namespace := cluster.Namespace(t)
	name := namespace
	fast := newStorageClass(t, namespace+"-fast")
	repo := newRepository(t, "platform/"+namespace+".git")
	subject := "Chart the bge server"
	commitA := commit(t, repo, subject, map[string]string{
		chartPath + "/Chart.yaml":            "apiVersion: v2\nname: server\nversion: 0.1.0\n",
		chartPath + "/values.yaml":           "storageClass: " + harness.DefaultStorageClass + "\n",
		chartPath + "/templates/server.yaml": serverManifest("{{ .Release.Name }}", "{{ .Values.storageClass }}", "0s", ""),
	})
	source := gitSource(repo.URL, chartPath)
	source["helm"] = map[string]any{
		"releaseName": name,
		"parameters":  []any{map[string]any{"name": "storageClass", "value": fast}},
	}
	createApplicationFrom(t, name, namespace, source)

	server := expectHealthyAfterServerReady(t, name, client.ObjectKey{Namespace: namespace, Name: name}, syncedAt(commitA))
	binding := expectArgoCDBindingAt(t, server, name, repo.URL, chartPath, commitA)
	NewWithT(t).Expect(binding.Spec.Decision.StorageClassName).To(Equal(fast))
	expectAudited(t, namespace, binding.Name, commitA, subject)
}
