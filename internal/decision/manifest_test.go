package decision_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/decision"
)

const stream = `apiVersion: v1
kind: Secret
metadata:
  name: hf-token
---
apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: a
spec:
  model:
    name: BAAI/bge-small-en-v1.5
---
# only a comment
---
apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: b
  namespace: team
spec:
  model:
    name: BAAI/bge-small-en-v1.5
`

func TestServersFromYAML(t *testing.T) {
	g := NewWithT(t)
	servers, err := decision.ServersFromYAML([]byte(stream), "default")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(servers).To(HaveLen(2), "the Secret and the empty document are skipped")
	g.Expect(servers[0].Namespace).To(Equal("default"), "a server without a namespace gets the default")
	g.Expect(servers[1].Namespace).To(Equal("team"))
}

func TestServersFromYAMLRefusesUnknownFields(t *testing.T) {
	g := NewWithT(t)
	_, err := decision.ServersFromYAML([]byte("apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata: {name: a}\nspec:\n  model: {name: a/b}\n  cache: {sise: 1Gi}\n"), "default")
	g.Expect(err).To(MatchError(decision.ErrInvalidSpec))
	g.Expect(err.Error()).To(ContainSubstring("document 1"))
	g.Expect(err.Error()).To(ContainSubstring("sise"))
}
