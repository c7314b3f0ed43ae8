package schema

import (
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

func TestOlderSchemasAreRefusedByName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(checkVersion("embeddingservers.embedops.dev", "")).To(MatchError(ContainSubstring("has schema version 1, older than this controller's 6")),
		"CRDs from before the annotation have schema 1, which lacks spec.rollout")
	g.Expect(checkVersion("modelcachebindings.embedops.dev", "2")).To(MatchError(ContainSubstring("has schema version 2, older than this controller's 6")),
		"schema 2 lacks status.realized.freeBytes")
	g.Expect(checkVersion("modelcachebindings.embedops.dev", "3")).To(MatchError(ContainSubstring("has schema version 3, older than this controller's 6")),
		"schema 3 refuses the controller's update of status.realized.freeBytes")
	g.Expect(checkVersion("modelcachebindings.embedops.dev", "4")).To(MatchError(ContainSubstring("has schema version 4, older than this controller's 6")),
		"schema 4 lacks status.claimFills")
	g.Expect(checkVersion("modelcachebindings.embedops.dev", "5")).To(MatchError(ContainSubstring("has schema version 5, older than this controller's 6")),
		"schema 5 lacks spec.resources.volumeSnapshotNames")
	g.Expect(checkVersion("embeddingservers.embedops.dev", "6")).To(Succeed())
	g.Expect(checkVersion("embeddingservers.embedops.dev", "7")).To(Succeed(), "a newer CRD keeps every field an older controller writes")
	err := checkVersion("modelcachebindings.embedops.dev", "1")
	g.Expect(err).To(MatchError(And(ContainSubstring("modelcachebindings.embedops.dev has schema version 1"),
		ContainSubstring("kubectl apply --server-side --force-conflicts -k config/crd"))))
	g.Expect(checkVersion("embeddingservers.embedops.dev", "one")).To(MatchError(ContainSubstring("not a schema version")))
	g.Expect(embedopsv1.SchemaVersion).To(BeNumerically(">=", embedopsv1.UnversionedSchema))
}
