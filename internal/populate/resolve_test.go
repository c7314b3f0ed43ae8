package populate_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
)

func TestResolveAsksTheHubOnlyForTheCommit(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	opts := options(t, hub, "", &sleeper{})

	result, err := populate.Resolve(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*result).To(Equal(populate.Result{ResolvedCommit: commit}), "only the commit: no file was cached")
	g.Expect(result.Recordable()).To(BeTrue())
	for _, r := range hub.Requests() {
		g.Expect(r.Path).To(HavePrefix("/api/models/"), "no file is downloaded")
	}
	g.Expect(hub.Requests()).To(HaveLen(1))
}

func TestResolveReturnsACommitWithoutTheHub(t *testing.T) {
	g := NewWithT(t)
	hub, commit := newHub(t)
	opts := options(t, hub, "", &sleeper{})
	opts.Revision = commit

	result, err := populate.Resolve(context.Background(), opts)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.ResolvedCommit).To(Equal(commit))
	g.Expect(hub.Requests()).To(BeEmpty())
}

func TestResolveRetriesThenFailsWithoutACache(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	hub.FailNext("/api/models/", 503, 100)
	s := &sleeper{}
	opts := options(t, hub, t.TempDir(), s)
	opts.MaxAttempts = 3

	_, err := populate.Resolve(context.Background(), opts)

	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("503"))
	g.Expect(s.recorded()).To(HaveLen(2), "retried as Run retries")
}

func TestResolveReportsAnUnknownRevision(t *testing.T) {
	g := NewWithT(t)
	hub, _ := newHub(t)
	opts := options(t, hub, "", &sleeper{})
	opts.Revision = "no-such-branch"

	_, err := populate.Resolve(context.Background(), opts)

	g.Expect(err).To(MatchError(ContainSubstring("no-such-branch")))
}
