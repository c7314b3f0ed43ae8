package builder_test

import (
	"testing"

	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

// BenchmarkStatefulSet measures what every reconcile pays to build a
// server's StatefulSet with a PerReplica cache and its populator. Run with
// `go test -bench . -benchmem ./internal/builder/`; allocs/op is the number
// to keep small.
func BenchmarkStatefulSet(b *testing.B) {
	es := server("bench", fixtures.WithReplicas(2))
	cache := withPopulator(perReplicaCache("cache-bench", "fast", "10Gi"), "embedops:bench")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := builder.StatefulSet(es, cache, builder.Facts{}); err != nil {
			b.Fatal(err)
		}
	}
}
