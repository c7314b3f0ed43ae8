package provenance_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/provenance"
)

// multiSource is an Application with a chart, a git path and a values ref,
// shaped as argo-cd's CRD (bin/crds/argocd) declares them.
const multiSource = `{"spec":{"sources":[
 {"repoURL":"https://charts.example.com","chart":"tei","targetRevision":"1.2.0"},
 {"repoURL":"https://git.example.com/fleet.git","path":"apps/models","targetRevision":"main"},
 {"repoURL":"https://git.example.com/fleet.git","ref":"values","targetRevision":"main"}]},
 "status":{"sync":{"revisions":["1.2.0","` + "0123456789abcdef0123456789abcdef01234567" + `","` + "0123456789abcdef0123456789abcdef01234567" + `"]}}}`

func decodeApp(t *testing.T, data string) map[string]any {
	t.Helper()
	app := map[string]any{}
	NewWithT(t).Expect(json.Unmarshal([]byte(data), &app)).To(Succeed())
	return app
}

func TestApplicationSources(t *testing.T) {
	g := NewWithT(t)
	sources, err := provenance.ApplicationSources(decodeApp(t, multiSource))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sources).To(HaveLen(3))
	g.Expect(sources[0]).To(Equal(provenance.ApplicationSource{RepoURL: "https://charts.example.com", Chart: "tei", Revision: "1.2.0"}))
	g.Expect(sources[2].Ref).To(Equal("values"))
	g.Expect(provenance.ManifestSource(sources)).To(Equal(1), "the git path among a chart and a values ref")

	chartOnly := sources[:1]
	g.Expect(provenance.ManifestSource(chartOnly)).To(Equal(0))
	g.Expect(provenance.ManifestSource(sources[2:])).To(Equal(-1), "a bare ref renders nothing")
}

func TestApplicationSourcesPreferTheRunningOperation(t *testing.T) {
	g := NewWithT(t)
	app := decodeApp(t, `{"spec":{"sources":[{"repoURL":"r","path":"p"}]},
	 "status":{"sync":{"revisions":["old"]},"operationState":{"syncResult":{"revisions":["new"]}}}}`)
	sources, err := provenance.ApplicationSources(app)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sources[0].Revision).To(Equal("new"))
}

func TestApplicationSourcesRefusesMisalignedRevisions(t *testing.T) {
	app := decodeApp(t, `{"spec":{"sources":[{"repoURL":"r","path":"p"},{"repoURL":"r","ref":"v"}]},"status":{"sync":{"revisions":["a"]}}}`)
	_, err := provenance.ApplicationSources(app)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("1 synced revisions for 2 sources")))
}

// FuzzApplicationSources checks that any Application decodes without a
// panic into one source per spec.sources entry (or the single source),
// each with the revision at its index, and that the manifest source is
// one of them.
func FuzzApplicationSources(f *testing.F) {
	for _, seed := range []string{multiSource, `{"spec":{"source":{"repoURL":"r","path":"p"}},"status":{"sync":{"revision":"x"}}}`,
		`{"spec":{"sources":[1]}}`, `{"spec":{"sources":[]},"status":{"sync":{"revisions":[null]}}}`, `{}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		app := map[string]any{}
		if json.Unmarshal([]byte(data), &app) != nil {
			return
		}
		sources, err := provenance.ApplicationSources(app)
		if err != nil {
			return
		}
		spec, _ := app["spec"].(map[string]any)
		if multi, _ := spec["sources"].([]any); len(multi) > 0 && len(sources) != len(multi) {
			t.Fatalf("%d sources from %d entries", len(sources), len(multi))
		}
		if len(sources) == 0 {
			t.Fatal("no error and no source")
		}
		if i := provenance.ManifestSource(sources); i < -1 || i >= len(sources) {
			t.Fatalf("manifest source %d of %d", i, len(sources))
		}
	})
}
