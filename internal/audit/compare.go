package audit

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// fieldValue is one compared field of a binding's spec, written as a string.
type fieldValue struct {
	field string
	value func(embedopsv1.CacheIdentity, embedopsv1.CacheDecision) string
	// same compares values that have several spellings; nil compares strings.
	same func(a, b embedopsv1.CacheDecision) bool
}

// comparedFields are the fields of a spec derived from the manifest, in the
// order differences are reported. Cluster facts are not compared.
var comparedFields = []fieldValue{
	{field: "identity.model", value: func(i embedopsv1.CacheIdentity, _ embedopsv1.CacheDecision) string { return i.Model }},
	{field: "identity.revision", value: func(i embedopsv1.CacheIdentity, _ embedopsv1.CacheDecision) string { return i.Revision }},
	{field: "identity.sharingDomain", value: func(i embedopsv1.CacheIdentity, _ embedopsv1.CacheDecision) string { return i.SharingDomain }},
	{field: "identity.key", value: func(i embedopsv1.CacheIdentity, _ embedopsv1.CacheDecision) string { return i.Key }},
	{field: "decision.mode", value: func(_ embedopsv1.CacheIdentity, d embedopsv1.CacheDecision) string { return string(d.Mode) }},
	{field: "decision.storageClassName", value: func(_ embedopsv1.CacheIdentity, d embedopsv1.CacheDecision) string { return d.StorageClassName }},
	{
		field: "decision.size",
		value: func(_ embedopsv1.CacheIdentity, d embedopsv1.CacheDecision) string { return d.Size.String() },
		same:  func(a, b embedopsv1.CacheDecision) bool { return a.Size.Cmp(b.Size) == 0 },
	},
	{field: "decision.accessModes", value: func(_ embedopsv1.CacheIdentity, d embedopsv1.CacheDecision) string { return accessModes(d.AccessModes) }},
	{field: "decision.reclaimPolicy", value: func(_ embedopsv1.CacheIdentity, d embedopsv1.CacheDecision) string { return string(d.ReclaimPolicy) }},
	{field: "decision.retainFor", value: func(_ embedopsv1.CacheIdentity, d embedopsv1.CacheDecision) string {
		return d.RetainFor.Duration.String()
	}},
	{field: "decision.existingClaim", value: func(_ embedopsv1.CacheIdentity, d embedopsv1.CacheDecision) string { return d.ExistingClaim }},
	{field: "decision.digest", value: func(_ embedopsv1.CacheIdentity, d embedopsv1.CacheDecision) string { return d.Digest }},
}

// accessModes writes a set of access modes sorted, comma-separated.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	set := make([]string, 0, len(modes))
	for _, m := range modes {
		set = append(set, string(m))
	}
	slices.Sort(set)
	return strings.Join(slices.Compact(set), ",")
}

// differences compares a recorded spec with the decision rendered from the
// manifest; rendered is nil when the manifest says cache.mode None.
func differences(recorded embedopsv1.ModelCacheBindingSpec, rendered *decision.Decision) []Difference {
	if rendered == nil {
		return []Difference{{Field: "decision.mode", Recorded: string(recorded.Decision.Mode), Rendered: string(embedopsv1.CacheModeNone)}}
	}
	var diffs []Difference
	for _, f := range comparedFields {
		was := f.value(recorded.Identity, recorded.Decision)
		is := f.value(rendered.Identity, rendered.Decision)
		equal := was == is
		if f.same != nil {
			equal = f.same(recorded.Decision, rendered.Decision)
		}
		if !equal {
			diffs = append(diffs, Difference{Field: f.field, Recorded: was, Rendered: is})
		}
	}
	return diffs
}

// integrity checks a binding against itself: its identity key and decision
// digest must be the ones its own fields give. It needs no repository.
func integrity(recorded embedopsv1.ModelCacheBindingSpec) []Difference {
	var diffs []Difference
	if key := decision.IdentityKey(recorded.Identity); key != recorded.Identity.Key {
		diffs = append(diffs, Difference{Field: "identity.key", Recorded: recorded.Identity.Key, Recomputed: key})
	}
	digest, err := decision.Digest(recorded.Identity, recorded.Decision)
	if err != nil {
		digest = "none (" + err.Error() + ")"
	}
	if digest != recorded.Decision.Digest {
		diffs = append(diffs, Difference{Field: "decision.digest", Recorded: recorded.Decision.Digest, Recomputed: digest})
	}
	return diffs
}

// merged adds the integrity findings to the rendered differences: a field
// found by both is reported once, with both the rendered and the
// recomputed value. The result follows the order of comparedFields.
func merged(rendered, selfChecked []Difference) []Difference {
	out := slices.Clone(rendered)
	for _, c := range selfChecked {
		i := slices.IndexFunc(out, func(d Difference) bool { return d.Field == c.Field })
		if i < 0 {
			out = append(out, c)
			continue
		}
		out[i].Recomputed = c.Recomputed
	}
	order := func(field string) int {
		return slices.IndexFunc(comparedFields, func(f fieldValue) bool { return f.field == field })
	}
	slices.SortStableFunc(out, func(a, b Difference) int { return order(a.Field) - order(b.Field) })
	return out
}
