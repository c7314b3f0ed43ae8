package main

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestMoveStorageClass(t *testing.T) {
	cases := []struct {
		name, manifest, want, from, to string
	}{
		{
			name:     "adds a class to the cache block",
			manifest: "spec:\n  cache:\n    retainFor: 30s\n",
			want:     "spec:\n  cache:\n    storageClassName: fast\n    retainFor: 30s\n",
			from:     "standard", to: "fast",
		},
		{
			name:     "moves fast back to the default class",
			manifest: "spec:\n  cache:\n    storageClassName: fast\n    retainFor: 30s\n",
			want:     "spec:\n  cache:\n    storageClassName: standard\n    retainFor: 30s\n",
			from:     "fast", to: "standard",
		},
		{
			name:     "moves any other class to fast",
			manifest: "spec:\n    cache:\n        storageClassName: gold\n",
			want:     "spec:\n    cache:\n        storageClassName: fast\n",
			from:     "gold", to: "fast",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			edited, from, to, err := moveStorageClass(c.manifest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(edited).To(Equal(c.want))
			g.Expect(from).To(Equal(c.from))
			g.Expect(to).To(Equal(c.to))
		})
	}
}

func TestMoveStorageClassNeedsACacheBlock(t *testing.T) {
	_, _, _, err := moveStorageClass("spec:\n  model:\n    name: a/b\n")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("no cache block")))
}
