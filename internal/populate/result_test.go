package populate

import "testing"

func TestResultRecordable(t *testing.T) {
	commit := "0123456789abcdef0123456789abcdef01234567"
	digest := "sha256:" + commit + "0123456789abcdef01234567"
	cases := map[string]struct {
		result Result
		want   bool
	}{
		"commit and digest":    {Result{ResolvedCommit: commit, ContentDigest: digest}, true},
		"commit only":          {Result{ResolvedCommit: commit}, true},
		"a branch":             {Result{ResolvedCommit: "main", ContentDigest: digest}, false},
		"an upper-case commit": {Result{ResolvedCommit: "0123456789ABCDEF0123456789ABCDEF01234567"}, false},
		"a short digest":       {Result{ResolvedCommit: commit, ContentDigest: "sha256:abc"}, false},
		"another algorithm":    {Result{ResolvedCommit: commit, ContentDigest: "sha512:" + commit + "0123456789abcdef01234567"}, false},
		"empty":                {Result{}, false},
	}
	for name, tc := range cases {
		if got := tc.result.Recordable(); got != tc.want {
			t.Errorf("%s: Recordable() = %t, want %t", name, got, tc.want)
		}
	}
}
