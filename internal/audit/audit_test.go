package audit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

func TestAuditVerifiesAndFindsTheOriginCommit(t *testing.T) {
	repo := newGitops(t)
	cases := []struct {
		name       string
		size       string
		recordedAt int
		originAt   int
	}{
		{name: "a replica change keeps the decision of its introduction", size: "10Gi", recordedAt: 4, originAt: 1},
		{name: "unrelated commits keep the decision of its introduction", size: "10Gi", recordedAt: 3, originAt: 1},
		{name: "the commit that introduces the decision is its own origin", size: "10Gi", recordedAt: 1, originAt: 1},
		{name: "a changed decision originates where it changed", size: "20Gi", recordedAt: 5, originAt: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			binding := bindingFor(t, prodServer(tc.size), repo.commits[tc.recordedAt])
			res := Audit(context.Background(), repo.repo, binding, Options{})
			g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
			g.Expect(res.Binding).To(Equal("prod/" + binding.Name))
			g.Expect(res.Server).To(Equal("prod/search"))
			g.Expect(res.RecordedCommit).To(Equal(repo.commits[tc.recordedAt]))
			g.Expect(res.OriginCommit).To(Equal(repo.commits[tc.originAt]))
			g.Expect(res.OriginAuthor).To(Equal(fmt.Sprintf("Dev %d <dev@example.com>", tc.originAt)))
			g.Expect(res.OriginDate).To(Equal(epoch.AddDate(0, 0, tc.originAt).Format(time.RFC3339)))
			g.Expect(res.OriginSubject).NotTo(ContainSubstring("\n"))
			g.Expect(res.Differences).To(BeEmpty())
			g.Expect(res.Reason).To(BeEmpty())
		})
	}
}

func TestAuditNamesTheOriginSubject(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	res := Audit(context.Background(), repo.repo, bindingFor(t, prodServer("10Gi"), repo.commits[4]), Options{})
	g.Expect(res.OriginSubject).To(Equal("Add the search server"))
	res = Audit(context.Background(), repo.repo, bindingFor(t, prodServer("20Gi"), repo.commits[5]), Options{})
	g.Expect(res.OriginSubject).To(Equal("Grow the search cache"))
}

func TestAuditReportsMismatches(t *testing.T) {
	repo := newGitops(t)
	tenGi := bindingFor(t, prodServer("10Gi"), repo.commits[4])
	twentyGi := bindingFor(t, prodServer("20Gi"), repo.commits[5])
	cases := []struct {
		name        string
		binding     *embedopsv1.ModelCacheBinding
		differences []string
	}{
		{
			name: "size edited, digest kept",
			binding: bindingFor(t, prodServer("10Gi"), repo.commits[4], withDecision(func(d *embedopsv1.CacheDecision) {
				d.Size = resource.MustParse("20Gi")
			})),
			differences: []string{
				"decision.size: recorded 20Gi, rendered 10Gi",
				"decision.digest: recorded " + tenGi.Spec.Decision.Digest + ", recomputed from the recorded fields " + twentyGi.Spec.Decision.Digest,
			},
		},
		{
			name: "digest edited",
			binding: bindingFor(t, prodServer("10Gi"), repo.commits[4], withDecision(func(d *embedopsv1.CacheDecision) {
				d.Digest = twentyGi.Spec.Decision.Digest
			})),
			differences: []string{
				"decision.digest: recorded " + twentyGi.Spec.Decision.Digest + ", rendered " + tenGi.Spec.Decision.Digest +
					", recomputed from the recorded fields " + tenGi.Spec.Decision.Digest,
			},
		},
		{
			name:    "recorded at a commit that decides otherwise",
			binding: bindingFor(t, prodServer("10Gi"), repo.commits[5]),
			differences: []string{
				"decision.size: recorded 10Gi, rendered 20Gi",
				"decision.digest: recorded " + tenGi.Spec.Decision.Digest + ", rendered " + twentyGi.Spec.Decision.Digest,
			},
		},
		{
			name: "storage class edited, digest kept",
			binding: bindingFor(t, prodServer("10Gi"), repo.commits[4], withDecision(func(d *embedopsv1.CacheDecision) {
				d.StorageClassName = ""
			})),
			differences: []string{
				`decision.storageClassName: recorded "", rendered fast`,
				"decision.digest: recorded " + tenGi.Spec.Decision.Digest + ", recomputed from the recorded fields ",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := Audit(context.Background(), repo.repo, tc.binding, Options{})
			g.Expect(res.Result).To(Equal(Mismatch))
			g.Expect(res.OriginCommit).To(BeEmpty(), "a mismatch has no origin")
			g.Expect(res.Differences).To(HaveLen(len(tc.differences)))
			for i, want := range tc.differences {
				g.Expect(res.Differences[i].String()).To(HavePrefix(want))
			}
		})
	}
	g := NewWithT(t)
	g.Expect(AnyMismatch([]Result{{Result: Verified}, {Result: Unverifiable}})).To(BeFalse())
	g.Expect(AnyMismatch([]Result{{Result: Verified}, {Result: Mismatch}})).To(BeTrue())
}

func TestAuditReportsUnverifiableBindings(t *testing.T) {
	repo := newGitops(t)
	cases := []struct {
		name   string
		option bindingOption
		reason string
	}{
		{
			name:   "method Unknown",
			option: withSource(func(s *embedopsv1.DecisionSource) { *s = embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown} }),
			reason: "source is Unknown",
		},
		{
			name:   "no commit",
			option: withSource(func(s *embedopsv1.DecisionSource) { s.Commit = "" }),
			reason: "records no commit",
		},
		{
			name:   "commit not in the repository",
			option: withSource(func(s *embedopsv1.DecisionSource) { s.Commit = strings.Repeat("ab", 20) }),
			reason: "commit abababababababababababababababababababab is not in the repository",
		},
		{
			name:   "SHA-256 commit",
			option: withSource(func(s *embedopsv1.DecisionSource) { s.Commit = strings.Repeat("ab", 32) }),
			reason: "not a SHA-1 commit id",
		},
		{
			name:   "path gone",
			option: withSource(func(s *embedopsv1.DecisionSource) { s.Path = "./clusters/staging" }),
			reason: `path "./clusters/staging" does not exist at commit`,
		},
		{
			name:   "path outside the repository",
			option: withSource(func(s *embedopsv1.DecisionSource) { s.Path = "../elsewhere" }),
			reason: "leaves the repository",
		},

		{
			name:   "render error",
			option: withSource(func(s *embedopsv1.DecisionSource) { s.Path = "monitoring" }),
			reason: `rendering path "monitoring"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			binding := bindingFor(t, prodServer("10Gi"), repo.commits[4], tc.option)
			res := Audit(context.Background(), repo.repo, binding, Options{})
			g.Expect(res.Result).To(Equal(Unverifiable))
			g.Expect(res.Reason).To(ContainSubstring(tc.reason))
			g.Expect(res.Differences).To(BeEmpty())
			g.Expect(res.OriginCommit).To(BeEmpty())
		})
	}
}

func TestAuditReportsADeletedPathAsUnverifiable(t *testing.T) {
	g := NewWithT(t)
	h := newHistory(t)
	h.commit("Add the search server",
		write("base/kustomization.yaml", baseKustomization),
		write("base/embeddingserver.yaml", baseServer),
		write(overlayPath+"/kustomization.yaml", overlayKustomization),
		write(overlayPath+"/search-patch.yaml", overlayPatch(1, "10Gi")))
	deleted := h.commit("Retire prod", remove("clusters"))
	_, repo := h.save()
	res := Audit(context.Background(), repo, bindingFor(t, prodServer("10Gi"), deleted), Options{})
	g.Expect(res.Result).To(Equal(Unverifiable))
	g.Expect(res.Reason).To(Equal(`path "./clusters/prod" does not exist at commit ` + deleted))
}

func TestAuditWarnsWhenAShallowHistoryCutsTheRun(t *testing.T) {
	g := NewWithT(t)
	h := newHistory(t)
	cut := h.commit("Add the search server",
		write("base/kustomization.yaml", baseKustomization),
		write("base/embeddingserver.yaml", baseServer),
		write(overlayPath+"/kustomization.yaml", overlayKustomization),
		write(overlayPath+"/search-patch.yaml", overlayPatch(1, "10Gi")))
	kept := h.commit("Document the fleet", write("README.md", "# fleet\n"))
	h.Forget(cut)
	_, repo := h.save()
	res := Audit(context.Background(), repo, bindingFor(t, prodServer("10Gi"), kept), Options{})
	g.Expect(res.Result).To(Equal(Verified))
	g.Expect(res.OriginCommit).To(Equal(kept))
	g.Expect(res.Reason).To(ContainSubstring("shallow"))
}

func TestAuditWithoutARepositoryIsUnverifiable(t *testing.T) {
	g := NewWithT(t)
	res := Audit(context.Background(), nil, bindingFor(t, prodServer("10Gi"), strings.Repeat("a", 40)), Options{})
	g.Expect(res.Result).To(Equal(Unverifiable))
	g.Expect(res.Reason).To(Equal("opening the repository: no repository"))
}

func TestAuditReportsABindingWithoutItsServerAsUnverifiable(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	other := prodServer("10Gi")
	other.Name = "other"
	res := Audit(context.Background(), repo.repo, bindingFor(t, other, repo.commits[4]), Options{})
	g.Expect(res.Result).To(Equal(Unverifiable))
	g.Expect(res.Reason).To(HavePrefix(`no matching EmbeddingServer for sharing domain "prod/other" in path "./clusters/prod" at commit ` + repo.commits[4]))
}

func TestAuditReportsATamperedBindingWithoutSourceAsMismatch(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	binding := bindingFor(t, prodServer("10Gi"), repo.commits[4],
		withSource(func(s *embedopsv1.DecisionSource) { s.Method, s.Commit = embedopsv1.SourceUnknown, "" }),
		withDecision(func(d *embedopsv1.CacheDecision) { d.Size = resource.MustParse("1Ti") }))
	res := Audit(context.Background(), repo.repo, binding, Options{})
	g.Expect(res.Result).To(Equal(Mismatch))
	g.Expect(res.Reason).To(ContainSubstring("Unknown"))
	g.Expect(res.Differences).To(ConsistOf(HaveField("Field", "decision.digest")))
	g.Expect(res.Differences[0].Rendered).To(BeEmpty())
}

func TestAuditReusesBuildsOfUnchangedInputs(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	res := Audit(context.Background(), repo.repo, bindingFor(t, prodServer("10Gi"), repo.commits[4]), Options{})
	g.Expect(res.Result).To(Equal(Verified))
	// 4, 3, 2, 1 and 0 are evaluated: 0 lacks the path and ends the run.
	g.Expect(res.CommitsWalked).To(Equal(5))
	// Builds: 4 (three replicas); 3 (two), which 2 and 1 reuse; 0 (no path).
	g.Expect(res.Renders).To(Equal(3))
	g.Expect(res.Renders).To(BeNumerically("<", res.CommitsWalked))
}

func TestAuditReportsProgress(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	var calls [][2]int
	opts := Options{Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) }}
	res := Audit(context.Background(), repo.repo, bindingFor(t, prodServer("20Gi"), repo.commits[5]), opts)
	g.Expect(res.Result).To(Equal(Verified))
	g.Expect(calls).To(Equal([][2]int{{0, 5}, {1, 5}, {5, 5}}), "the search stops at commit 4 and then finishes")
}

func TestAuditStopsWhenCanceled(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Audit(ctx, repo.repo, bindingFor(t, prodServer("10Gi"), repo.commits[4]), Options{})
	g.Expect(res.Result).To(Equal(Unverifiable))
	g.Expect(res.Reason).To(ContainSubstring("context canceled"))
}

func TestAllUsesTheLocalRepositoryAndSharesBuilds(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	bindings := []embedopsv1.ModelCacheBinding{
		*bindingFor(t, prodServer("10Gi"), repo.commits[4]),
		*bindingFor(t, prodServer("10Gi"), repo.commits[3]),
		*bindingFor(t, prodServer("20Gi"), repo.commits[5]),
	}
	results := All(context.Background(), RepositoryOptions{Path: repo.dir}, bindings, Options{})
	g.Expect(results).To(HaveLen(3))
	g.Expect(results).To(HaveEach(HaveField("Result", Verified)))
	g.Expect(results[0].OriginCommit).To(Equal(repo.commits[1]))
	g.Expect(results[1].Renders).To(BeZero(), "the second binding reuses the first one's builds")
	g.Expect(results[2].OriginCommit).To(Equal(repo.commits[5]))
}

func TestAllReportsARepositoryThatCannotBeOpened(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	bindings := []embedopsv1.ModelCacheBinding{*bindingFor(t, prodServer("10Gi"), repo.commits[4])}
	results := All(context.Background(), RepositoryOptions{Path: t.TempDir()}, bindings, Options{})
	g.Expect(results).To(ConsistOf(HaveField("Result", Unverifiable)))
	g.Expect(results[0].Reason).To(ContainSubstring("opening the repository"))
}

func TestAuditVerifiesASuccessorByItsOwnDecision(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	root := bindingFor(t, prodServer("20Gi"), repo.commits[5])
	successor := bindingFor(t, prodServer("20Gi"), repo.commits[5])
	successor.Name = root.Name + "-2"
	successor.Spec.Supersedes = root.Name
	successor.Spec.Resources.StorageName = root.Name
	res := Audit(context.Background(), repo.repo, successor, Options{})
	g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
	g.Expect(res.OriginCommit).To(Equal(repo.commits[5]))
}

func TestAuditStorageOriginIgnoresARetainForChange(t *testing.T) {
	g := NewWithT(t)
	h := newHistory(t)
	keptFor := func(retainFor string) string {
		return overlayPatch(2, "10Gi") + "    retainFor: " + retainFor + "\n"
	}
	commits := []string{
		h.commit("Add the search server",
			write("base/kustomization.yaml", baseKustomization),
			write("base/embeddingserver.yaml", baseServer),
			write(overlayPath+"/kustomization.yaml", overlayKustomization),
			write(overlayPath+"/search-patch.yaml", keptFor("24h"))),
		h.commit("Keep search data for two days", write(overlayPath+"/search-patch.yaml", keptFor("48h"))),
		h.commit("Document the fleet", write("README.md", "# fleet\n")),
	}
	_, repo := h.save()
	server := prodServer("10Gi")
	server.Spec.Cache.RetainFor = &metav1.Duration{Duration: 48 * time.Hour}
	res := Audit(context.Background(), repo, bindingFor(t, server, commits[2]), Options{})
	g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
	g.Expect(res.OriginCommit).To(Equal(commits[1]), "the decision, retainFor included, is the edit's")
	g.Expect(res.StorageOriginCommit).To(Equal(commits[0]), "the storage was decided with the server")

	standard := newGitops(t)
	sized := Audit(context.Background(), standard.repo, bindingFor(t, prodServer("20Gi"), standard.commits[5]), Options{})
	g.Expect(sized.Result).To(Equal(Verified))
	g.Expect(sized.StorageOriginCommit).To(Equal(sized.OriginCommit), "a size change moves both")
}
