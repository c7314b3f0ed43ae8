package writes

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestVersionsCompareResourceVersionsAsNumbers(t *testing.T) {
	var versions Versions
	key := types.NamespacedName{Namespace: "ns", Name: "tei"}
	if versions.Behind(key, "5") {
		t.Error("nothing written: the cache is trusted")
	}
	versions.Record(key, "99")
	versions.Record(key, "100")
	versions.Record(key, "98") // an older write answered late is not the last
	for rv, want := range map[string]bool{
		"99":            true,
		"100":           false,
		"1000":          false, // longer is newer, not lexically smaller
		"not-a-version": true,  // what does not compare is read from the API server
	} {
		if got := versions.Behind(key, rv); got != want {
			t.Errorf("Behind(%q) = %v, want %v", rv, got, want)
		}
	}
	versions.Forget(key)
	if versions.Behind(key, "1") {
		t.Error("forgotten: the cache is trusted again")
	}
}
