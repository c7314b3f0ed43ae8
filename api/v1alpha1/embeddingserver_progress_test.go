package v1alpha1_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// progressDeadlineRefused is the admission message of a bad
// spec.progressDeadline.
const progressDeadlineRefused = "progressDeadline must be a duration greater than zero and at most 8760h, such as 10m or 1h30m"

func TestProgressDeadlineDefaultsToADeploymentsDeadline(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	obj := serverManifest(t, namespace, "bare", "model:\n  name: BAAI/bge-small-en-v1.5\n")
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())

	server := &embedopsv1.EmbeddingServer{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), server)).To(Succeed())
	g.Expect(server.Spec.ProgressDeadline).NotTo(BeNil())
	g.Expect(server.Spec.ProgressDeadline.Duration).To(Equal(10 * time.Minute))
	g.Expect(server.GetProgressDeadline()).To(Equal(embedopsv1.DefaultProgressDeadline))
}

func TestProgressDeadlineIsAPositiveDurationOfAtMostAYear(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	const model = "model:\n  name: BAAI/bge-small-en-v1.5\n"
	cases := []struct {
		value string
		want  time.Duration
	}{
		{"30s", 30 * time.Second},
		{"1.5h", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"8760h", 8760 * time.Hour},
		{"0s", 0},
		{"0", 0},
		{"-1m", 0},
		{"1d", 0},
		{"soon", 0},
		{"8761h", 0},
		{"9999999999h", 0},
	}
	for i, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			g := NewWithT(t)
			obj := serverManifest(t, namespace, "s"+string(rune('a'+i)), model+"progressDeadline: \""+tc.value+"\"\n")
			err := env.Client.Create(t.Context(), obj)
			if tc.want == 0 {
				g.Expect(err).To(MatchError(ContainSubstring(progressDeadlineRefused)), "the API server accepted %q", tc.value)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			server := &embedopsv1.EmbeddingServer{}
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), server)).To(Succeed())
			g.Expect(server.GetProgressDeadline()).To(Equal(tc.want))
		})
	}
}
