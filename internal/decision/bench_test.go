package decision_test

import (
	"testing"

	"github.com/embedops/embedops/internal/decision"
)

// BenchmarkDecide measures what every reconcile pays to derive a server's
// cache decision: decision.For, its identity key and digest included. Run
// with `go test -bench . -benchmem ./internal/decision/`; allocs/op is the
// number to keep small.
func BenchmarkDecide(b *testing.B) {
	es := server(withDefaults)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decision.For(es); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDigest measures the decision digest alone.
func BenchmarkDigest(b *testing.B) {
	d, err := decision.For(server(withDefaults))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decision.Digest(d.Identity, d.Decision); err != nil {
			b.Fatal(err)
		}
	}
}
