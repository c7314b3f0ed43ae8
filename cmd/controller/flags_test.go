package main

import (
	"testing"

	. "github.com/onsi/gomega"
	flag "github.com/spf13/pflag"
)

// parse binds the controller's flags on a fresh flag set and parses args.
func parse(t *testing.T, args ...string) *flags {
	t.Helper()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	f := bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFlagsBecomeManagerOptions(t *testing.T) {
	g := NewWithT(t)
	opts, err := parse(t, "--concurrent=7", "--binding-history-limit=3", "--endpoint-check=on",
		"--watch-label-selector=sharding.fluxcd.io/key=shard1").managerOptions("embedops-system", func() bool { return false })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(opts.EmbeddingServer.MaxConcurrentReconciles).To(Equal(7))
	g.Expect(opts.ModelCacheBinding.HistoryLimit).To(Equal(3))
	g.Expect(opts.EmbeddingServer.EndpointCheck).To(BeTrue())
	g.Expect(opts.EmbeddingServer.EndpointProber).NotTo(BeNil(), "in a namespace the controller's pods are admitted")
	g.Expect(opts.Watch.LabelSelector).To(Equal("sharding.fluxcd.io/key=shard1"))
}

func TestTheRetiredFirstStatusWaitFlagStillParses(t *testing.T) {
	_, err := parse(t, "--first-status-wait=1m").managerOptions("", func() bool { return false })
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "a manifest that still passes it must start")
}

func TestBadFlagValuesAreRefused(t *testing.T) {
	g := NewWithT(t)
	_, err := parse(t, "--endpoint-check=yes").managerOptions("", func() bool { return true })
	g.Expect(err).To(MatchError(ContainSubstring(`endpoint check mode "yes"`)))
	_, err = parse(t, "--endpoint-check-pod-labels=").managerOptions("embedops-system", func() bool { return true })
	g.Expect(err).To(MatchError(ContainSubstring("empty")))
}
