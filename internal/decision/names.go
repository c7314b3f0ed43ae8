package decision

import "strings"

const (
	// maxPrefixLength keeps binding names at most 52 characters long, so a
	// suffix for a successor binding still fits in a 63-character label.
	maxPrefixLength = 30
	// shortHexLength is how many hex digits of a digest a name carries.
	shortHexLength = 10
	// fallbackPrefix names a binding whose model name has no usable letters.
	fallbackPrefix = "cache"
)

// BindingName returns the deterministic name of the binding recording d:
// "<model>-<10 hex of the identity key>-<10 hex of the decision digest>", a
// DNS-1123 label of at most 52 characters. d must come from For.
func BindingName(d *Decision) string {
	return namePrefix(d.Identity.Model) + "-" + shortHex(d.Identity.Key) + "-" + shortHex(d.Decision.Digest)
}

// ClaimTemplateName returns the name of the StatefulSet volumeClaimTemplates
// entry of a PerReplica cache: "cache-<10 hex of the decision digest>".
func ClaimTemplateName(d *Decision) string {
	return "cache-" + shortHex(d.Decision.Digest)
}

// shortHex is the first hex digits of a "sha256:" digest.
func shortHex(digest string) string {
	hex := strings.TrimPrefix(digest, digestPrefix)
	return hex[:min(len(hex), shortHexLength)]
}

// namePrefix is the last segment of a model name as a short DNS label:
// lowercased, runs of other characters turned into one '-', trimmed.
func namePrefix(model string) string {
	segment := model[strings.LastIndex(strings.TrimRight(model, "/"), "/")+1:]
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(segment) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	prefix := strings.TrimRight(b.String()[:min(b.Len(), maxPrefixLength)], "-")
	if prefix == "" {
		return fallbackPrefix
	}
	return prefix
}
