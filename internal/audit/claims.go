package audit

import (
	"slices"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// ClaimProvenance says how one claim of a binding was filled.
type ClaimProvenance struct {
	// Claim is the claim's name.
	Claim string `json:"claim"`
	// FilledBy is Download (its populator, from the hub), Clone or
	// Snapshot.
	FilledBy embedopsv1.ClaimFillMethod `json:"filledBy"`
	// Source is the claim a Clone copied, or the VolumeSnapshot a Snapshot
	// restored.
	Source string `json:"source,omitempty"`
	// Commit is the model commit the source held when it was copied.
	Commit string `json:"commit,omitempty"`
	// Fallback says why a copy was abandoned for a download.
	Fallback string `json:"fallback,omitempty"`
	// MatchesRealized: a copy holds the commit the binding realized, so
	// its replica's populator checked it against that commit's manifest.
	// False for a copy of another commit, which the audit does not count
	// as the binding's cache.
	MatchesRealized bool `json:"matchesRealized"`
}

// claimsOf is the provenance of every claim the binding lists: its record
// in status.claimFills, else a download by the claim's own populator.
func claimsOf(binding *embedopsv1.ModelCacheBinding) []ClaimProvenance {
	realized := ""
	if binding.Status.Realized != nil {
		realized = binding.Status.Realized.ResolvedCommit
	}
	fills := map[string]embedopsv1.ClaimFill{}
	for _, fill := range binding.Status.ClaimFills {
		fills[fill.Name] = fill
	}
	names := slices.Clone(binding.Spec.Resources.PersistentVolumeClaimNames)
	for name := range fills {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var claims []ClaimProvenance
	for _, name := range names {
		fill, recorded := fills[name]
		if !recorded {
			claims = append(claims, ClaimProvenance{Claim: name, FilledBy: embedopsv1.ClaimFilledByDownload, MatchesRealized: true})
			continue
		}
		claims = append(claims, ClaimProvenance{Claim: name, FilledBy: fill.Method, Source: fill.Source, Commit: fill.Commit,
			Fallback: fill.Fallback, MatchesRealized: fill.Method == embedopsv1.ClaimFilledByDownload || fill.Commit == realized})
	}
	return claims
}
