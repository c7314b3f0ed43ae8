package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit/audittest"
	"github.com/embedops/embedops/internal/decision"
)

// diffServer is a server of apps/ in the diff history.
func diffServer(name, model, revision, cache string) string {
	return "apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata:\n  name: " + name +
		"\nspec:\n  model:\n    name: " + model + "\n    revision: " + revision + "\n" + cache
}

// diffKustomization renders apps/ into namespace team, as Flux would.
const diffKustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef: {kind: GitRepository, name: fleet}
  targetNamespace: team
`

// diffHistory is a repository of three commits: none without apps/, then
// before and after a change that keeps search, changes only docs'
// retainFor, bumps rerank's model revision (two replicas: it may roll in
// place), removes legacy and adds fresh.
type diffHistory struct {
	dir, empty, before, after string
}

func newDiffHistory(t *testing.T) diffHistory {
	t.Helper()
	h := audittest.NewHistory()
	history := diffHistory{dir: t.TempDir()}
	history.empty = h.Commit("Start the fleet", audittest.Write("README.md", "# fleet\n"))
	history.before = h.Commit("Serve the apps",
		audittest.Write("apps/search.yaml", diffServer("search", "BAAI/bge-small-en-v1.5", "main", "")),
		audittest.Write("apps/docs.yaml", diffServer("docs", "BAAI/bge-base-en-v1.5", "main", "  cache:\n    retainFor: 30s\n")),
		audittest.Write("apps/rerank.yaml", diffServer("rerank", "BAAI/bge-reranker-base", "main", "  replicas: 2\n")),
		audittest.Write("apps/legacy.yaml", diffServer("legacy", "intfloat/e5-small", "main", "  cache:\n    mode: Shared\n    retainFor: 168h\n")))
	history.after = h.Commit("Pin rerank, keep docs an hour, replace legacy by fresh",
		audittest.Write("apps/docs.yaml", diffServer("docs", "BAAI/bge-base-en-v1.5", "main", "  cache:\n    retainFor: 1h\n")),
		audittest.Write("apps/rerank.yaml", diffServer("rerank", "BAAI/bge-reranker-base", "v2", "  replicas: 2\n")),
		audittest.Remove("apps/legacy.yaml"),
		audittest.Write("apps/fresh.yaml", diffServer("fresh", "intfloat/multilingual-e5-small", "main", "")))
	if _, err := h.Save(history.dir); err != nil {
		t.Fatal(err)
	}
	return history
}

// runDiffCLI runs diff on the history from from to to, with the cluster
// off unless args say otherwise.
func runDiffCLI(t *testing.T, history diffHistory, from, to string, args ...string) (string, string, error) {
	t.Helper()
	ks := writeObject(t, diffKustomization)
	return runCLI("", append([]string{"diff", "--kustomization", ks, "--repo", history.dir, "--from", from, "--to", to}, args...)...)
}

// diffJSON runs diff with -o json and decodes its report.
func diffJSON(t *testing.T, g *WithT, history diffHistory, from, to string, args ...string) diffReport {
	t.Helper()
	out, _, err := runDiffCLI(t, history, from, to, append(args, "-o", "json")...)
	g.Expect(err).NotTo(HaveOccurred())
	var report diffReport
	g.Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
	return report
}

// serverActions are each server's actions and whether it rolls.
func serverActions(report diffReport) map[string]string {
	found := map[string]string{}
	for _, s := range report.Servers {
		var actions []string
		for _, c := range s.Caches {
			actions = append(actions, string(c.Action))
		}
		if s.Rolls {
			actions = append(actions, "rolls")
		}
		found[s.Server] = strings.Join(actions, ",")
	}
	return found
}

func TestDiffListsWhatAChangeDoesToEachCache(t *testing.T) {
	g := NewWithT(t)
	history := newDiffHistory(t)
	report := diffJSON(t, g, history, history.before, "main", "--cluster=off")

	g.Expect(report.From.Commit).To(Equal(history.before))
	g.Expect(report.To.Commit).To(Equal(history.after))
	g.Expect(serverActions(report)).To(Equal(map[string]string{
		"team/search": "Keep",
		"team/docs":   "KeepLifetimeChanged",
		"team/rerank": "KeepRevised",
		"team/legacy": "Retire",
		"team/fresh":  "Create",
	}))
	g.Expect(report.Summary).To(Equal(diffSummary{Create: 1, Keep: 1, KeepLifetimeChanged: 1, KeepRevised: 1, Retire: 1, Rolls: []string{}}))
	g.Expect(report.Sizes).To(Equal("unknown: --cluster=off"))
	for _, s := range report.Servers {
		switch s.Server {
		case "team/legacy":
			g.Expect(s.Caches[0].Decision.RetainFor.Duration.String()).To(Equal("168h0m0s"), "retired data goes after the old retainFor")
		case "team/docs":
			g.Expect(s.Caches[0].PreviousRetainFor.Duration.String()).To(Equal("30s"))
			g.Expect(s.Caches[0].Decision.RetainFor.Duration.String()).To(Equal("1h0m0s"))
		case "team/rerank":
			g.Expect(s.Caches).To(HaveLen(1), "the old binding is superseded, not retired")
			g.Expect(s.Caches[0].Identity.Revision).To(Equal("v2"))
			g.Expect(s.Caches[0].Supersedes).To(HavePrefix("bge-reranker-base-"))
			g.Expect(s.Caches[0].Condition).To(ContainSubstring("if the claims have room for another revision"), "no binding gives the model's size")
			g.Expect(s.Caches[0].Download.Copies).To(Equal(int32(2)), "a claim per replica")
		}
	}

	// Before apps/ existed, every server is new.
	report = diffJSON(t, g, history, history.empty, history.before, "--cluster=off")
	g.Expect(report.Summary.Create).To(Equal(4))
	g.Expect(report.Summary.Retire).To(BeZero())
}

func TestDiffTableIsAPlan(t *testing.T) {
	g := NewWithT(t)
	history := newDiffHistory(t)
	out, _, err := runDiffCLI(t, history, history.before, "main", "--cluster=off")
	g.Expect(err).NotTo(HaveOccurred())
	lines := strings.Split(out, "\n")
	g.Expect(lines[0]).To(Equal(history.dir + ": " + history.before[:12] + " -> main (" + history.after[:12] + ")"))
	g.Expect(out).To(MatchRegexp(`(?m)^SERVER\s+ACTION\s+BINDING\s+MODEL\s+CACHE\s+RETAIN FOR\s+DOWNLOAD\s+ROLLS$`))
	g.Expect(out).To(MatchRegexp(`(?m)^team/docs\s+~ keep \(lifetime changed\)\s+bge-base-en-v1-5-\S+\s+BAAI/bge-base-en-v1.5@main\s+PerReplica 10Gi\s+30s -> 1h\s+-\s+no$`))
	g.Expect(out).To(MatchRegexp(`(?m)^team/rerank\s+~ keep \(revised in place\)\s+\S+\s+BAAI/bge-reranker-base@v2\s+.*\s+24h\s+unknown\s+no$`))
	g.Expect(out).To(MatchRegexp(`(?m)^team/rerank: bge-reranker-base-\S+ takes over the claims of bge-reranker-base-\S+ if the claims have room for another revision`))
	g.Expect(out).To(MatchRegexp(`(?m)^team/legacy\s+- retire\s+\S+\s+intfloat/e5-small@main\s+Shared 10Gi\s+168h\s+-\s+no$`))
	g.Expect(out).To(ContainSubstring("Plan: 1 to create, 1 kept, 1 kept with a new lifetime, 1 kept with a new revision, 1 to retire. Rolls: none. Download: unknown (sizes: unknown: --cluster=off).\n"))

	// A path neither revision has: nothing to list.
	out, _, err = runDiffCLI(t, history, history.empty, history.empty, "--cluster=off")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HaveSuffix("\n\nNo cache decisions at either revision.\n"))
	out, _, err = runDiffCLI(t, history, history.empty, history.empty, "--cluster=off", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`"servers": []`))
}

func TestDiffMarkdownIsReadyForAPullRequest(t *testing.T) {
	g := NewWithT(t)
	history := newDiffHistory(t)
	out, _, err := runDiffCLI(t, history, history.before, history.after, "--cluster=off", "-o", "markdown")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HavePrefix("### embedops diff `" + history.before[:12] + "` → `" + history.after[:12] + "`\n"))
	g.Expect(out).To(ContainSubstring("> [!WARNING]\n> This change releases cached data: `e5-small-"))
	g.Expect(out).To(ContainSubstring("is released 168h after its last user leaves"))
	g.Expect(out).To(ContainSubstring("| Server | Action | Binding | Model | Cache | Retain for | Download | Rolls |\n| --- |"))
	g.Expect(out).To(MatchRegexp("(?m)^\\| `team/docs` \\| ~ keep \\(lifetime changed\\) \\| `bge-base-en-v1-5-[0-9a-f-]+` \\| `BAAI/bge-base-en-v1.5@main` \\| PerReplica 10Gi \\| 30s -> 1h \\| - \\| no \\|$"))
	g.Expect(out).To(ContainSubstring("\n- `team/rerank`: `bge-reranker-base-"))
	g.Expect(out).To(ContainSubstring("Rolls: none."))
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "|") {
			g.Expect(strings.Count(line, " | ")).To(Equal(7), "eight cells: %s", line)
		}
	}

	// Nothing released, no warning.
	out, _, err = runDiffCLI(t, history, history.empty, history.before, "--cluster=off", "-o", "markdown")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).NotTo(ContainSubstring("WARNING"))
	g.Expect(out).To(ContainSubstring("Plan: 4 to create. Rolls: none."))
}

func TestDiffFailsOnRetireWhenAsked(t *testing.T) {
	g := NewWithT(t)
	history := newDiffHistory(t)
	out, _, err := runDiffCLI(t, history, history.before, history.after, "--cluster=off", "--fail-on-retire")
	g.Expect(err).To(MatchError(ErrRetires))
	g.Expect(ExitCode(err)).To(Equal(3))
	g.Expect(out).To(ContainSubstring("1 to retire"), "the plan is printed before the failure")

	_, _, err = runDiffCLI(t, history, history.before, history.after, "--cluster=off")
	g.Expect(err).NotTo(HaveOccurred(), "exit status 0 without the flag")
	_, _, err = runDiffCLI(t, history, history.empty, history.before, "--cluster=off", "--fail-on-retire")
	g.Expect(err).NotTo(HaveOccurred(), "nothing is released")
}

func TestDiffSizesDownloadsFromRealizedBindings(t *testing.T) {
	g := NewWithT(t)
	history := newDiffHistory(t)
	bindings := filepath.Join(t.TempDir(), "bindings.yaml")
	realized := func(name, model, revision, bytes string) string {
		return "apiVersion: embedops.dev/v1alpha1\nkind: ModelCacheBinding\nmetadata: {name: " + name + ", namespace: other}\n" +
			"spec:\n  identity: {model: " + model + ", revision: " + revision + ", sharingDomain: other}\n" +
			"status:\n  realized: {bytes: " + bytes + "}\n"
	}
	g.Expect(os.WriteFile(bindings, []byte("apiVersion: v1\nkind: List\nitems: []\n---\n"+
		realized("a", "intfloat/multilingual-e5-small", "main", "134217728")+"---\n"+
		realized("c", "BAAI/bge-reranker-base", "main", "1073741824")+"---\n"+
		realized("b", "BAAI/bge-reranker-base", "v2", "1073741824")), 0o600)).To(Succeed())

	report := diffJSON(t, g, history, history.before, history.after, "--bindings", bindings)
	g.Expect(report.Sizes).To(Equal("bindings in " + bindings))
	g.Expect(report.Summary.DownloadBytes).To(HaveValue(Equal(int64(134217728 + 2*1073741824))))

	out, _, err := runDiffCLI(t, history, history.before, history.after, "--bindings", bindings)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`(?m)^team/fresh\s.*\s128\.0 MiB\s+no$`))
	g.Expect(out).To(MatchRegexp(`(?m)^team/rerank\s+~ keep \(revised in place\)\s.*\s2\.0 GiB \(2 x 1\.0 GiB\)\s+no$`))
	g.Expect(out).NotTo(ContainSubstring("takes over the claims"), "10Gi holds the 1 GiB model twice: no condition")
	g.Expect(out).To(ContainSubstring("Download: 2.1 GiB"))
}

func TestDiffWithoutACluster(t *testing.T) {
	g := NewWithT(t)
	history := newDiffHistory(t)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	report := diffJSON(t, g, history, history.before, history.after)
	g.Expect(report.Sizes).To(Equal("unknown: no kubeconfig"))
	g.Expect(report.Summary.DownloadBytes).To(BeNil())

	_, _, err := runDiffCLI(t, history, history.before, history.after, "--cluster=on")
	g.Expect(err).To(MatchError(ContainSubstring("no kubeconfig")))

	// A cluster that cannot be reached: a warning in auto mode, an error
	// when asked for; the kubeconfig's token is never printed.
	kubeconfig := writeObject(t, `apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: s3cr3t-token}}]
contexts: [{name: gone, context: {cluster: gone, user: u}}]
current-context: gone
`)
	out, stderr, err := runDiffCLI(t, history, history.before, history.after, "--kubeconfig", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stderr).To(ContainSubstring("model sizes unknown"))
	g.Expect(out).To(ContainSubstring("sizes: unknown: the cluster cannot be read"))
	_, stderr, err = runDiffCLI(t, history, history.before, history.after, "--kubeconfig", kubeconfig, "--cluster=on")
	g.Expect(err).To(MatchError(ContainSubstring("listing ModelCacheBindings")))
	g.Expect(err.Error() + stderr).NotTo(ContainSubstring("s3cr3t-token"))
}

func TestDiffRefusesBadInputClearly(t *testing.T) {
	history := newDiffHistory(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"a revision the repository lacks", []string{"--repo", history.dir, "--from", "v9.9.9"}, "resolving v9.9.9 in " + history.dir},
		{"a directory that is no repository", []string{"--repo", t.TempDir(), "--from", "main"}, "opening repository"},
		{"an unreachable repository", []string{"--repo", "https://ada:hunter2-secret@127.0.0.1:1/fleet.git", "--from", "main", "--cache-dir", t.TempDir()},
			"cloning https://ada:xxxxx@127.0.0.1:1/fleet.git"},
		{"an unknown output", []string{"--repo", history.dir, "--from", "main", "-o", "yaml"}, "unknown output format"},
		{"no --from", []string{"--repo", history.dir}, `"from" not set`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ks := writeObject(t, diffKustomization)
			_, stderr, err := runCLI("", append([]string{"diff", "--kustomization", ks, "--cluster=off"}, tc.args...)...)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(err.Error() + stderr).NotTo(ContainSubstring("hunter2"))
			g.Expect(ExitCode(err)).To(Equal(ExitUsage))
			g.Expect(errors.Is(err, ErrRetires)).To(BeFalse())
		})
	}
}

func TestDiffSummaryCountsEachDecisionOnce(t *testing.T) {
	g := NewWithT(t)
	shared := decision.CacheChange{Action: decision.ActionCreate, Binding: "b", Download: &decision.Download{Copies: 1, BytesPerCopy: new(int64(10))}}
	joined := decision.CacheChange{Action: decision.ActionCreate, Binding: "b", Download: &decision.Download{}}
	summary := summaryOf(&decision.Plan{Servers: []decision.ServerChange{
		{Server: "ns/a", Caches: []decision.CacheChange{shared}},
		{Server: "ns/b", Caches: []decision.CacheChange{joined}},
	}})
	g.Expect(summary.Create).To(Equal(1))
	g.Expect(summary.DownloadBytes).To(HaveValue(Equal(int64(10))))
}

func TestDiffNamesAnExistingClaimAsTheCache(t *testing.T) {
	g := NewWithT(t)
	g.Expect(cacheOf(embedopsv1.CacheDecision{Mode: embedopsv1.CacheModeShared, ExistingClaim: "models"})).To(Equal("existing claim models"))
	g.Expect(cacheOf(embedopsv1.CacheDecision{Mode: embedopsv1.CacheModeShared, Size: resource.MustParse("20Gi"), StorageClassName: "fast"})).To(Equal("Shared 20Gi fast"))
}

// A server whose move stops a pod before its successor starts says so in
// its Rolls column.
func TestDiffRowsSayWhichMovesReplaceInPlace(t *testing.T) {
	report := &diffReport{Servers: []decision.ServerChange{
		{Server: "ns/gpu", Rolls: true, InPlace: true}, {Server: "ns/cpu", Rolls: true}, {Server: "ns/idle"},
	}}
	var rolls []string
	for _, row := range diffRows(report, func(s string) string { return s }) {
		rolls = append(rolls, row.server+": "+row.rolls)
	}
	NewWithT(t).Expect(rolls).To(Equal([]string{"ns/gpu: yes, in place (maxSurge 0)", "ns/cpu: yes", "ns/idle: no"}))
}
