package audit

import (
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// TestClaimsSayHowEachClaimWasFilled: a claim without a record was
// downloaded by its own populator; a clone or a restore names its source
// and commit, and counts as the binding's cache only at the commit it
// realized.
func TestClaimsSayHowEachClaimWasFilled(t *testing.T) {
	const realized, other = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	binding := &embedopsv1.ModelCacheBinding{}
	binding.Spec.Resources.PersistentVolumeClaimNames = []string{"c-tei-0", "c-tei-1", "c-tei-2"}
	binding.Status.Realized = &embedopsv1.RealizedCache{ResolvedCommit: realized}
	binding.Status.ClaimFills = []embedopsv1.ClaimFill{
		{Name: "c-tei-1", Method: embedopsv1.ClaimFilledByClone, Source: "c-tei-0", Commit: realized},
		{Name: "c-tei-2", Method: embedopsv1.ClaimFilledByDownload, Source: "c-tei-0", Commit: realized, Fallback: "not bound within 2m0s"},
		{Name: "c-tei-3", Method: embedopsv1.ClaimFilledByClone, Source: "c-tei-0", Commit: other},
		{Name: "c-tei-4", Method: embedopsv1.ClaimFilledBySnapshot, Source: "b-111111111111", Commit: realized},
	}
	NewWithT(t).Expect(claimsOf(binding)).To(Equal([]ClaimProvenance{
		{Claim: "c-tei-0", FilledBy: embedopsv1.ClaimFilledByDownload, MatchesRealized: true},
		{Claim: "c-tei-1", FilledBy: embedopsv1.ClaimFilledByClone, Source: "c-tei-0", Commit: realized, MatchesRealized: true},
		{Claim: "c-tei-2", FilledBy: embedopsv1.ClaimFilledByDownload, Source: "c-tei-0", Commit: realized, Fallback: "not bound within 2m0s", MatchesRealized: true},
		{Claim: "c-tei-3", FilledBy: embedopsv1.ClaimFilledByClone, Source: "c-tei-0", Commit: other},
		{Claim: "c-tei-4", FilledBy: embedopsv1.ClaimFilledBySnapshot, Source: "b-111111111111", Commit: realized, MatchesRealized: true},
	}))
}
