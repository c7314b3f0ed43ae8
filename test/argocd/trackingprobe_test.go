package argocd

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/internal/provenance"
	"github.com/embedops/embedops/test/harness"
)

// probeWait bounds one probe Application's sync: it syncs a ConfigMap
// within seconds once Argo CD sees it.
const probeWait = time.Minute

// waitForTrackingMethod waits until the application-controller syncs with
// method: argocd-cm reaches it through an informer (argo-cd v2.14.21
// util/settings/settings.go), with no sign outside it of when. Each round
// syncs a new probe Application holding one ConfigMap and reads how the
// ConfigMap is marked (controller/sync.go, argo.SetAppInstance): an
// Application synced before the change keeps the old mark, so a round that
// sees it starts another, until one sees the method's mark.
func waitForTrackingMethod(t *testing.T, namespace, method string) {
	t.Helper()
	repo := newRepository(t, "probes/"+namespace+".git")
	deadline := time.Now().Add(settle)
	for round := 1; ; round++ {
		name := fmt.Sprintf("probe-%s-%d", method, round)
		marked := syncProbe(t, repo, namespace, name)
		if tracksBy(marked, name, method) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Argo CD still tracks %s with labels %v and annotations %v, not by %s", name, marked.Labels, marked.Annotations, method)
		}
		t.Logf("probe %s synced before Argo CD read %s=%s; another round", name, trackingMethodKey, method)
	}
}

// syncProbe commits a ConfigMap named name under its own path, has an
// Application of that name sync it into namespace, and returns it as
// synced.
func syncProbe(t *testing.T, repo *harness.GitRepo, namespace, name string) *corev1.ConfigMap {
	t.Helper()
	manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  probe: %s\n", name, name)
	commit(t, repo, "Probe "+name, map[string]string{name + "/configmap.yaml": manifest})
	createApplication(t, name, namespace, repo.URL, name)
	synced := &corev1.ConfigMap{}
	NewWithT(t).Eventually(func() error {
		return cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, synced)
	}).WithTimeout(probeWait).WithPolling(pollInterval).Should(Succeed(), "Application %s syncs ConfigMap %s", name, name)
	return synced
}

// tracksBy reports whether the synced object carries the mark of method
// for the Application app: the tracking id with annotation tracking, the
// instance label and no tracking id with label tracking.
func tracksBy(obj client.Object, app, method string) bool {
	_, annotated := obj.GetAnnotations()[provenance.TrackingIDAnnotation]
	labelled := obj.GetLabels()[provenance.InstanceLabel] == app
	if method == "annotation" {
		return annotated
	}
	return labelled && !annotated
}
