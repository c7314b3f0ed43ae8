package controller

import (
	"slices"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/populate"
)

// realizedOf is what a populate result gives a binding to record: the
// commit, the content digest, the bytes and, when they fit the schema's
// bounds, the file names.
func realizedOf(result populate.Result) *embedopsv1.RealizedCache {
	realized := &embedopsv1.RealizedCache{ResolvedCommit: result.ResolvedCommit, ContentDigest: result.ContentDigest}
	if result.Bytes > 0 {
		realized.Bytes = new(result.Bytes)
	}
	if recordableFiles(result.Names) {
		realized.Files = slices.Clone(result.Names)
	}
	return realized
}

// recordableFiles reports whether names fit status.realized.files: a set,
// within its bounds.
func recordableFiles(names []string) bool {
	if len(names) == 0 || len(names) > embedopsv1.MaxRealizedFiles {
		return false
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for i, name := range sorted {
		if name == "" || len(name) > embedopsv1.MaxRealizedFileNameLength || (i > 0 && sorted[i-1] == name) {
			return false
		}
	}
	return true
}
