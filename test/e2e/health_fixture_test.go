package e2e

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/healthcheck"
)

// updateHealthFixtures rewrites the recorded Argo CD test cases.
var updateHealthFixtures = flag.Bool("update-health-fixtures", false,
	"rewrite config/argocd's EmbeddingServer test cases from the statuses the controller writes")

// serverGroupKind is the EmbeddingServer's directory under
// config/argocd/resource_customizations.
const serverGroupKind = "embedops.dev/EmbeddingServer"

// fixtureHeader opens every recorded test case.
const fixtureHeader = `# Recorded by test/e2e TestHealthChecksReadWhatTheControllerWrites from a
# server on the local cluster, namespace written as default; refresh with
# go test ./test/e2e -run TestHealthChecksReadWhatTheControllerWrites -update-health-fixtures
`

// fixtureTime replaces the recorded conditions' transition times.
var fixtureTime = metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// expectFixture rewrites the recorded test case file from server with
// -update-health-fixtures; otherwise it checks that the file carries the
// Ready, Reconciling and Stalled conditions (type, status, reason) the
// controller wrote.
func expectFixture(t *testing.T, file string, server *embedopsv1.EmbeddingServer) {
	t.Helper()
	g := NewWithT(t)
	root, err := harness.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(root, healthcheck.CustomizationsDir, serverGroupKind, "testdata", file)
	if *updateHealthFixtures {
		g.Expect(os.WriteFile(path, recordedFixture(t, server), 0o644)).To(Succeed())
	}
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	var checkedIn embedopsv1.EmbeddingServer
	g.Expect(yaml.Unmarshal(data, &checkedIn)).To(Succeed())
	g.Expect(kstatusOf(&checkedIn)).To(Equal(kstatusOf(server)),
		"%s no longer holds what the controller writes: rerun with -update-health-fixtures", file)
}

// recordedFixture is server as a test case: its spec without the default
// image, as a manifest would leave it out, and the status the health checks
// read, with the namespace written as default and fixed transition times.
func recordedFixture(t *testing.T, server *embedopsv1.EmbeddingServer) []byte {
	t.Helper()
	g := NewWithT(t)
	recorded := &embedopsv1.EmbeddingServer{
		TypeMeta:   metav1.TypeMeta{APIVersion: embedopsv1.GroupVersion.String(), Kind: embedopsv1.EmbeddingServerKind},
		ObjectMeta: metav1.ObjectMeta{Name: server.Name, Namespace: server.Namespace, Generation: server.Generation},
		Spec:       *server.Spec.DeepCopy(),
		Status: embedopsv1.EmbeddingServerStatus{
			ObservedGeneration: server.Status.ObservedGeneration,
			Phase:              server.Status.Phase,
			Replicas:           server.Status.Replicas,
			ReadyReplicas:      server.Status.ReadyReplicas,
		},
	}
	if recorded.Spec.Image == embedopsv1.DefaultImage {
		recorded.Spec.Image = ""
	}
	for _, c := range server.Status.Conditions {
		c.LastTransitionTime = fixtureTime
		recorded.Status.Conditions = append(recorded.Status.Conditions, c)
	}
	data, err := json.Marshal(recorded)
	g.Expect(err).NotTo(HaveOccurred())
	data, err = yaml.JSONToYAML([]byte(strings.ReplaceAll(string(data), server.Namespace, "default")))
	g.Expect(err).NotTo(HaveOccurred())
	return append([]byte(fixtureHeader), data...)
}

// kstatusOf is what the health checks read of a server's status: its
// Ready, Reconciling and Stalled conditions as "status/reason" by type.
func kstatusOf(server *embedopsv1.EmbeddingServer) map[string]string {
	s := map[string]string{}
	for _, c := range server.Status.Conditions {
		switch c.Type {
		case embedopsv1.ReadyCondition, embedopsv1.ReconcilingCondition, embedopsv1.StalledCondition:
			s[c.Type] = string(c.Status) + "/" + c.Reason
		}
	}
	return s
}
