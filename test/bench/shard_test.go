package bench

import (
	"flag"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// shardServers is how many servers TestShardsSplitTheFleet creates; `make
// bench BENCH_FLAGS="--mode shard"` runs the 200 of the issue.
var shardServers = flag.Int("shard-servers", 40, "servers TestShardsSplitTheFleet splits between two shards")

// shardTimeout bounds each wait of the sharding test.
const shardTimeout = 10 * time.Minute

// TestShardsSplitTheFleet runs two controller processes on the local
// cluster, --watch-label-selector=sharding.fluxcd.io/key=shard1 and
// =shard2 as in Flux's sharding docs, with servers split between them, and
// checks in the API server's audit log, by user agent, that no server was
// written by both shards and no server, child or binding by the wrong one.
func TestShardsSplitTheFleet(t *testing.T) {
	g := NewWithT(t)
	report, err := RunShards(t.Context(), ShardOptions{
		Servers: *shardServers, Shards: 2, Timeout: shardTimeout,
		ControllerArgs: []string{"--progress-interval=" + controllerProgressInterval.String()},
		Log:            testLog{t},
	})
	must(t, err)
	for _, row := range report.Rows() {
		t.Logf("%s: %s %s", row.Metric, row.Value, row.Note)
	}
	g.Expect(report.ServersOfTwoShards).To(BeZero())
	g.Expect(report.WrongServerWrites).To(BeZero())
	g.Expect(report.WrongBindingWrites).To(BeZero())
	g.Expect(report.UnattributedWrites).To(BeZero())
	for _, shard := range report.Shards {
		g.Expect(shard.Servers).To(Equal(*shardServers/2), shard.Shard)
		g.Expect(shard.Bindings).To(Equal(*shardServers/2), "one PerReplica binding per server, in its server's shard: %s", shard.Shard)
		g.Expect(shard.BindingWrites).To(BeNumerically(">=", shard.Bindings), "each shard wrote its own bindings: %s", shard.Shard)
		g.Expect(shard.ServerWrites).To(BeNumerically(">=", shard.Servers), "each shard reconciled its own servers: %s", shard.Shard)
	}
}

// testLog writes progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p))
	return len(p), nil
}
