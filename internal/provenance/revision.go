package provenance

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidRevision is wrapped by every revision that cannot be parsed.
var ErrInvalidRevision = errors.New("invalid revision")

// Revision is a parsed source revision.
type Revision struct {
	// Ref is the branch, tag or ref name, empty when the revision names none.
	Ref string
	// Algorithm is the digest algorithm: sha1 for git commits, sha256 for
	// SHA-256 git repositories and OCI artifacts.
	Algorithm string
	// Hex is the lowercase hex digest.
	Hex string
}

// Commit returns the git commit the revision names, or "" when it names an
// artifact digest rather than a commit.
func (r Revision) Commit() string {
	if r.Algorithm == "sha1" {
		return r.Hex
	}
	return ""
}

// String returns the revision in RFC-0005 form.
func (r Revision) String() string {
	digest := r.Algorithm + ":" + r.Hex
	if r.Ref == "" {
		return digest
	}
	return r.Ref + "@" + digest
}

// hexLengths are the digest lengths of each algorithm.
var hexLengths = map[string]int{"sha1": 40, "sha256": 64}

// ParseRevision parses `<ref>@<algo>:<hex>`, `<algo>:<hex>`, the legacy
// `<ref>/<hex>` and a bare 40-hex sha.
func ParseRevision(s string) (Revision, error) {
	switch {
	case s == "":
		return Revision{}, fmt.Errorf("%w: empty", ErrInvalidRevision)
	case strings.Contains(s, "@"):
		return parseRefDigest(s)
	case strings.Contains(s, ":"):
		return parseDigest("", s)
	case isHex(s, hexLengths["sha1"]):
		return Revision{Algorithm: "sha1", Hex: strings.ToLower(s)}, nil
	default:
		return parseLegacy(s)
	}
}

// parseRefDigest splits at the last @, since a ref may itself contain one.
func parseRefDigest(s string) (Revision, error) {
	at := strings.LastIndex(s, "@")
	if at == 0 {
		return Revision{}, fmt.Errorf("%w: %q has no ref before @", ErrInvalidRevision, s)
	}
	return parseDigest(s[:at], s[at+1:])
}

// parseDigest checks `<algo>:<hex>` against the algorithm's length.
func parseDigest(ref, digest string) (Revision, error) {
	algorithm, hex, ok := strings.Cut(digest, ":")
	length, known := hexLengths[algorithm]
	if !ok || !known {
		return Revision{}, fmt.Errorf("%w: %q is not <sha1|sha256>:<hex>", ErrInvalidRevision, digest)
	}
	if !isHex(hex, length) {
		return Revision{}, fmt.Errorf("%w: %q is not %d hex digits", ErrInvalidRevision, hex, length)
	}
	return Revision{Ref: ref, Algorithm: algorithm, Hex: strings.ToLower(hex)}, nil
}

// parseLegacy reads Flux's pre-RFC-0005 `<ref>/<hex>`; the ref may hold
// slashes (refs/heads/main/<hex>).
func parseLegacy(s string) (Revision, error) {
	slash := strings.LastIndex(s, "/")
	if slash <= 0 || !isHex(s[slash+1:], hexLengths["sha1"]) {
		return Revision{}, fmt.Errorf("%w: %q is none of <ref>@sha1:<hex>, sha1:<hex>, <ref>/<hex> or a 40-hex sha", ErrInvalidRevision, s)
	}
	return Revision{Ref: s[:slash], Algorithm: "sha1", Hex: strings.ToLower(s[slash+1:])}, nil
}

// isHex reports whether s is exactly n hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}
