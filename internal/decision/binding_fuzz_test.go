package decision_test

import (
	"strconv"
	"testing"

	"github.com/embedops/embedops/internal/decision"
)

// FuzzBindingSuffix checks that bindingSuffix and bindingNameAt are
// inverses: every name found to be one of base's is the name made for its
// ordinal, and every ordinal's name is found again.
func FuzzBindingSuffix(f *testing.F) {
	for _, seed := range []struct {
		base, name string
		n          int
	}{
		{"mcb-0123", "mcb-0123", 1}, {"mcb-0123", "mcb-0123-2", 2}, {"mcb-0123", "mcb-0123-02", 100},
		{"a", "a-+3", 0}, {"a", "a--3", -3}, {"a-2", "a-2-2", 3}, {"", "-5", 5}, {"a", "a-9223372036854775808", 9},
	} {
		f.Add(seed.base, seed.name, seed.n)
	}
	f.Fuzz(func(t *testing.T, base, name string, n int) {
		if k := decision.BindingSuffix(base, name); k != 0 {
			if k < 1 || decision.BindingNameAt(base, k) != name {
				t.Fatalf("%q is ordinal %d of %q, whose name is %q", name, k, base, decision.BindingNameAt(base, k))
			}
		} else if name == base {
			t.Fatalf("%q is not found as its own first name", base)
		}
		if n < 1 || n > decision.MaxBindingSuffix {
			return
		}
		if k := decision.BindingSuffix(base, decision.BindingNameAt(base, n)); k != n {
			t.Fatalf("name %d of %q is %q, found as ordinal %d", n, base, decision.BindingNameAt(base, n), k)
		}
		if n > 1 && decision.BindingNameAt(base, n) != base+"-"+strconv.Itoa(n) {
			t.Fatalf("name %d of %q is %q", n, base, decision.BindingNameAt(base, n))
		}
	})
}
