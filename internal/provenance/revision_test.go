package provenance_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/provenance"
)

var (
	sha1Hex   = "0123456789abcdef0123456789abcdef01234567"
	sha256Hex = strings.Repeat("ab", 32)
)

func TestParseRevision(t *testing.T) {
	cases := []struct {
		in                     string
		ref, algorithm, commit string
	}{
		{"main@sha1:" + sha1Hex, "main", "sha1", sha1Hex},
		{"refs/heads/main@sha1:" + sha1Hex, "refs/heads/main", "sha1", sha1Hex},
		{"v1.2.3@sha1:" + strings.ToUpper(sha1Hex), "v1.2.3", "sha1", sha1Hex},
		{"user@example@sha1:" + sha1Hex, "user@example", "sha1", sha1Hex},
		{"sha1:" + sha1Hex, "", "sha1", sha1Hex},
		{"latest@sha256:" + sha256Hex, "latest", "sha256", ""},
		{"main/" + sha1Hex, "main", "sha1", sha1Hex},
		{"refs/heads/main/" + sha1Hex, "refs/heads/main", "sha1", sha1Hex},
		{sha1Hex, "", "sha1", sha1Hex},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			rev, err := provenance.ParseRevision(tc.in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rev.Ref).To(Equal(tc.ref))
			g.Expect(rev.Algorithm).To(Equal(tc.algorithm))
			g.Expect(rev.Commit()).To(Equal(tc.commit))
		})
	}
}

func TestParseRevisionRefusesMalformed(t *testing.T) {
	for _, in := range []string{
		"", "main", "main@", "@sha1:" + sha1Hex, "main@md5:abc", "main@sha1:" + sha1Hex[:39],
		"main@sha1:" + sha1Hex + "0", "sha1:" + strings.Repeat("g", 40), "sha256:" + sha1Hex,
		"main/" + sha1Hex[:12], "/" + sha1Hex,
	} {
		t.Run(in, func(t *testing.T) {
			_, err := provenance.ParseRevision(in)
			NewWithT(t).Expect(err).To(MatchError(provenance.ErrInvalidRevision))
		})
	}
}

// FuzzParseRevision checks that parsing never panics, that a parsed
// revision's digest has its algorithm's length, and that the RFC-0005 form
// parses back to the same revision.
func FuzzParseRevision(f *testing.F) {
	for _, seed := range []string{"main@sha1:" + sha1Hex, "sha1:" + sha1Hex, "main/" + sha1Hex, sha1Hex, "x@sha256:" + sha256Hex, "a@b@c", ":/@"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rev, err := provenance.ParseRevision(in)
		if err != nil {
			return
		}
		if want := map[string]int{"sha1": 40, "sha256": 64}[rev.Algorithm]; len(rev.Hex) != want {
			t.Fatalf("%q parsed to a %s digest of %d characters", in, rev.Algorithm, len(rev.Hex))
		}
		again, err := provenance.ParseRevision(rev.String())
		if err != nil || again != rev {
			t.Fatalf("%q -> %q -> %+v, %v; want %+v", in, rev.String(), again, err, rev)
		}
	})
}
