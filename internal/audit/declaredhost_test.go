package audit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

func TestRepositoryHostReadsEveryGitURLForm(t *testing.T) {
	cases := map[string]string{
		"https://Git.Example.com/fleet.git":    "git.example.com",
		"https://user@git.example.com:8443/x":  "git.example.com",
		"ssh://git@git.example.com:2222/x.git": "git.example.com",
		"git@git.example.com:platform/x.git":   "git.example.com",
		"git.example.com:platform/x.git":       "git.example.com",
		"http://127.0.0.1:3000/x.git":          "127.0.0.1",
		"file:///srv/git/fleet.git":            "",
		"/srv/git/fleet.git":                   "",
		"./fleet:odd":                          "",
		"":                                     "",
	}
	for url, want := range cases {
		t.Run(url, func(t *testing.T) {
			NewWithT(t).Expect(RepositoryHost(url)).To(Equal(want))
		})
	}
}

// countingServer is an HTTP server on 127.0.0.1 that counts the requests
// it gets and answers none of them with a repository.
func countingServer(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.NotFound(w, nil)
	}))
	t.Cleanup(server.Close)
	return server.URL, &requests
}

func TestDeclaredRepositoriesAreFetchedOnlyFromKnownHosts(t *testing.T) {
	s := serveGitops(t)
	if err := s.server.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.server.StopHTTP)
	served := s.server.HTTPAddress() + "/" + filepath.Base(s.dir)
	elsewhere, requests := countingServer(t)
	fromCluster := map[string]string{"127.0.0.1": "GitRepository flux-system/fleet"}
	cases := []struct {
		name       string
		method     embedopsv1.SourceMethod
		repository string
		hosts      *DeclaredHosts
		want       OmegaMatcher
	}{
		{name: "a host a cluster source uses", method: embedopsv1.SourceDeclared, repository: served,
			hosts: &DeclaredHosts{Cluster: fromCluster}, want: s.verified()},
		{name: "an allowed host", method: embedopsv1.SourceDeclared, repository: served,
			hosts: &DeclaredHosts{Allowed: []string{"127.0.0.1:1"}}, want: s.verified()},
		{name: "any other host", method: embedopsv1.SourceDeclared, repository: elsewhere + "/fleet.git",
			hosts: &DeclaredHosts{Cluster: map[string]string{"git.example.com": "GitRepository flux-system/fleet"}},
			want:  unverifiable("is on 127.0.0.1, which no Flux source or Argo CD Application of the cluster uses and which is not allowed")},
		{name: "a file URL", method: embedopsv1.SourceDeclared, repository: "file://" + s.dir,
			hosts: &DeclaredHosts{Allowed: []string{"127.0.0.1"}}, want: unverifiable("names no network host")},
		{name: "a local path", method: embedopsv1.SourceDeclared, repository: s.dir,
			hosts: &DeclaredHosts{Cluster: fromCluster}, want: unverifiable("names no network host")},
		{name: "an attested repository is the tool's", method: embedopsv1.SourceFlux, repository: served,
			hosts: &DeclaredHosts{}, want: s.verified()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			binding := bindingFor(t, prodServer("10Gi"), s.commits[4], withSource(func(src *embedopsv1.DecisionSource) {
				src.Method, src.Repository = tc.method, tc.repository
			}))
			opts := RepositoryOptions{CacheDir: t.TempDir()}
			results := All(context.Background(), opts, []embedopsv1.ModelCacheBinding{*binding}, Options{DeclaredHosts: tc.hosts})
			g.Expect(results).To(HaveExactElements(tc.want))
		})
	}
	NewWithT(t).Expect(requests.Load()).To(BeZero(), "a refused host is never asked")
}

func TestDeclaredHostsDoNotApplyToALocalRepository(t *testing.T) {
	g := NewWithT(t)
	repo := newGitops(t)
	binding := bindingFor(t, prodServer("10Gi"), repo.commits[4], withSource(func(src *embedopsv1.DecisionSource) {
		src.Method, src.Repository = embedopsv1.SourceDeclared, "https://elsewhere.example/fleet.git"
	}))
	opts := RepositoryOptions{Path: repo.dir, CacheDir: t.TempDir()}
	results := All(context.Background(), opts, []embedopsv1.ModelCacheBinding{*binding}, Options{DeclaredHosts: &DeclaredHosts{}})
	g.Expect(results).To(HaveExactElements(And(HaveField("Result", Verified), HaveField("Attestation", Declared))),
		"--repo fetches nothing: the user chose the repository")
}
