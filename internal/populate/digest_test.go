package populate_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

func TestContentDigestEncodingVersion1(t *testing.T) {
	g := NewWithT(t)
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	// The encoding documented in doc.go, written out by hand.
	encoding := "23:embedops.dev/content/v1," + "1:2," +
		"11:config.json,64:" + a + "," +
		"17:model.safetensors,64:" + b + ","
	sum := sha256.Sum256([]byte(encoding))

	got := populate.ContentDigest([]populate.FileDigest{{Name: "model.safetensors", SHA256: b}, {Name: "config.json", SHA256: a}})

	g.Expect(got).To(Equal("sha256:" + hex.EncodeToString(sum[:])))
}

func TestContentDigestDistinguishesFileLists(t *testing.T) {
	h := strings.Repeat("0", 64)
	cases := []struct {
		name string
		a, b []populate.FileDigest
	}{
		{"name boundary", []populate.FileDigest{{Name: "ab", SHA256: "c"}}, []populate.FileDigest{{Name: "a", SHA256: "bc"}}},
		{"one file or two", []populate.FileDigest{{Name: "a", SHA256: h}}, []populate.FileDigest{{Name: "a", SHA256: h}, {Name: "b", SHA256: h}}},
		{"renamed", []populate.FileDigest{{Name: "a/b", SHA256: h}}, []populate.FileDigest{{Name: "a-b", SHA256: h}}},
		{"empty or not", nil, []populate.FileDigest{{Name: "", SHA256: ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(populate.ContentDigest(tc.a)).NotTo(Equal(populate.ContentDigest(tc.b)))
		})
	}
}

func TestContentDigestIgnoresOrder(t *testing.T) {
	g := NewWithT(t)
	files := []populate.FileDigest{{Name: "b", SHA256: "2"}, {Name: "a", SHA256: "1"}, {Name: "c/d", SHA256: "3"}}
	reordered := []populate.FileDigest{files[2], files[1], files[0]}
	g.Expect(populate.ContentDigest(reordered)).To(Equal(populate.ContentDigest(files)))
	g.Expect(files[0].Name).To(Equal("b"), "the caller's slice is not sorted in place")
}
