package decision_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

func TestForRefusesWhatAdmissionRefuses(t *testing.T) {
	g := NewWithT(t)
	_, err := decision.For(server(func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.RetainFor = &metav1.Duration{Duration: decision.MaxRetainFor + time.Hour}
	}))
	g.Expect(err).To(MatchError(decision.ErrInvalidSpec))
	g.Expect(err).To(MatchError(ContainSubstring("at most 8760h")))

	_, err = decision.For(server(func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.RetainFor = &metav1.Duration{Duration: decision.MaxRetainFor}
	}))
	g.Expect(err).NotTo(HaveOccurred())
}

func TestServersFromYAMLRefusesHugeExponentsBeforeDecoding(t *testing.T) {
	for _, size := range []string{`"1e-100000000"`, "1E100", `"5e+123Ki"`, "123456789012345678901234567890123Gi"} {
		t.Run(size, func(t *testing.T) {
			g := NewWithT(t)
			manifest := fmt.Sprintf(`apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata: {name: s, namespace: ns}
spec:
  model: {name: BAAI/bge-small-en-v1.5}
  cache: {size: %s}
`, size)
			_, err := decision.ServersFromYAML([]byte(manifest), "")
			g.Expect(err).To(MatchError(decision.ErrInvalidSpec))
			g.Expect(err).To(MatchError(ContainSubstring("exponent of at most two digits")))
		})
	}
}
