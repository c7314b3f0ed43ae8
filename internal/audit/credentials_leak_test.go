package audit

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fluxcd/pkg/gittestserver"
	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// recorder keeps what reached one loopback git server: each request's
// headers and basic authentication, each offered SSH key, each client
// certificate presented.
type recorder struct {
	mu       sync.Mutex
	requests []string
}

// record notes one request's method, path, headers and basic
// authentication, which is where an HTTP credential can travel.
func (r *recorder) record(req *http.Request) {
	user, password, _ := req.BasicAuth()
	var seen strings.Builder
	seen.WriteString(req.Method + " " + req.URL.Path + " " + user + ":" + password)
	for name, values := range req.Header {
		seen.WriteString(" " + name + "=" + strings.Join(values, ","))
	}
	r.add(seen.String())
}

// add notes one thing that reached the server.
func (r *recorder) add(seen string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, seen)
}

// reset forgets what was recorded.
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
}

// seen is what was recorded.
func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

// middleware records every request before the git server answers it.
func (r *recorder) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.record(req)
		next.ServeHTTP(w, req)
	})
}

// leakFixture is one set of repositories served by two loopback git
// servers, "trusted" and "other", on two ports of 127.0.0.1: the fleet of
// the standard history, a fleet whose GitRepository includes a platform
// repository, and a fleet with the platform as a submodule. Either server
// serves each repository; the URL says which host is asked.
type leakFixture struct {
	root     string
	gitops   *gitops
	includes *includes
	// submoduleFleet links the platform at vendor/platform in submoduleCommit,
	// its .gitmodules URL naming the platform on the other server.
	submoduleFleet, submoduleCommit string
}

// servingRoot is the directory the test's temporary directories are made
// in, where the fixture's repositories will be: the servers start on it
// before the repositories exist, since the submodule's URL names one.
func servingRoot(t *testing.T) string {
	t.Helper()
	requireUploadPack(t)
	return filepath.Dir(t.TempDir())
}

// newLeakFixture writes the repositories into root, the submodule's URL
// naming otherBase.
func newLeakFixture(t *testing.T, root, otherBase string) *leakFixture {
	t.Helper()
	f := &leakFixture{root: root, gitops: newGitops(t), includes: newIncludes(t)}
	h := newHistory(t)
	parent := h.commit("Serve search from the platform submodule",
		write(".gitmodules", "[submodule \"platform\"]\n\tpath = vendor/platform\n\turl = "+otherBase+"/"+filepath.Base(f.includes.platformDir)+"\n"),
		write(overlayPath+"/kustomization.yaml", strings.Replace(includingKustomization, "platform/base", "vendor/platform/deploy/base", 1)),
		write(overlayPath+"/search-patch.yaml", overlayPatch(2, "10Gi")))
	dir, repo := h.save()
	f.submoduleFleet, f.submoduleCommit = dir, withGitlink(t, repo, parent, "vendor/platform", f.includes.platformCommit)
	// A clone fetches branches: one must hold the gitlink's commit.
	if err := repo.Storer.SetReference(plumbing.NewHashReference("refs/heads/linked", plumbing.NewHash(f.submoduleCommit))); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{f.gitops.dir, f.includes.fleetDir, f.includes.platformDir, f.submoduleFleet} {
		if filepath.Dir(d) != f.root {
			t.Fatalf("%s is not in %s: one server cannot serve every repository", d, f.root)
		}
	}
	return f
}

// servedHTTP is a git server over plain HTTP on 127.0.0.1 recording
// every request.
type servedHTTP struct {
	base string
	*recorder
}

// serveRecordingHTTP serves root over HTTP, recording every request.
func serveRecordingHTTP(t *testing.T, root string) *servedHTTP {
	t.Helper()
	s := &servedHTTP{recorder: &recorder{}}
	server := gittestserver.NewGitServer(root)
	server.AddHTTPMiddlewares(s.middleware)
	if err := server.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.StopHTTP)
	s.base = server.HTTPAddress()
	if !strings.HasPrefix(s.base, "http://127.0.0.1:") {
		t.Fatalf("the git server listens on %s, not on 127.0.0.1", s.base)
	}
	return s
}

// route is a way a repository URL reaches the audit: one binding's own
// repository, an include, a submodule, or an artifact's git origin. The
// binding it gives names the other server where the route leads.
type route struct {
	name string
	// binding is a binding whose route leads to otherBase; trustedBase
	// is where the rest of it is.
	binding func(t *testing.T, f *leakFixture, trustedBase, otherBase string) *embedopsv1.ModelCacheBinding
	// alsoTrusted says the audit asks the trusted server too.
	alsoTrusted bool
}

// routes are the ways a URL of another host reaches the audit.
func routes() []route {
	return []route{
		{name: "the binding's repository", binding: func(t *testing.T, f *leakFixture, _, otherBase string) *embedopsv1.ModelCacheBinding {
			return bindingFor(t, prodServer("10Gi"), f.gitops.commits[4], atRepository(otherBase, f.gitops.dir))
		}},
		{name: "an include", alsoTrusted: true, binding: func(t *testing.T, f *leakFixture, trustedBase, otherBase string) *embedopsv1.ModelCacheBinding {
			include := f.includes.include
			include.Repository = otherBase + "/" + filepath.Base(f.includes.platformDir)
			return bindingFor(t, prodServer("10Gi"), f.includes.fleet[2], atRepository(trustedBase, f.includes.fleetDir),
				withGitSource(t, embedopsv1.GitSourceInputs{Include: []embedopsv1.GitInclude{include}}))
		}},
		{name: "a submodule", alsoTrusted: true, binding: func(t *testing.T, f *leakFixture, trustedBase, _ string) *embedopsv1.ModelCacheBinding {
			return bindingFor(t, prodServer("10Gi"), f.submoduleCommit, atRepository(trustedBase, f.submoduleFleet),
				withGitSource(t, embedopsv1.GitSourceInputs{RecurseSubmodules: true}))
		}},
		{name: "an artifact's origin", binding: func(t *testing.T, f *leakFixture, _, otherBase string) *embedopsv1.ModelCacheBinding {
			return bindingFor(t, prodServer("10Gi"), f.gitops.commits[4], withArtifact(otherBase+"/"+filepath.Base(f.gitops.dir)))
		}},
	}
}

// atRepository records the repository in dir, served at base.
func atRepository(base, dir string) bindingOption {
	return withSource(func(s *embedopsv1.DecisionSource) { s.Repository = base + "/" + filepath.Base(dir) })
}

// auditOne audits one binding with repos.
func auditOne(t *testing.T, repos RepositoryOptions, binding *embedopsv1.ModelCacheBinding) Result {
	t.Helper()
	repos.CacheDir = t.TempDir()
	results := All(context.Background(), repos, []embedopsv1.ModelCacheBinding{*binding}, Options{})
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	return results[0]
}

// TestHTTPCredentialsReachOnlyTheHostTheyAreFor: a token, a password and a
// bearer token given for one server never reach another, whether a
// binding's repository, an include, a submodule or an artifact's origin
// leads there; the server they are for gets them.
func TestHTTPCredentialsReachOnlyTheHostTheyAreFor(t *testing.T) {
	root := servingRoot(t)
	trusted, other := serveRecordingHTTP(t, root), serveRecordingHTTP(t, root)
	f := newLeakFixture(t, root, other.base)
	kinds := []struct {
		name   string
		creds  Credentials
		secret string
	}{
		{name: "token", creds: CredentialsFromEnv(env(EnvToken, "t0ken-secret")), secret: "t0ken-secret"},
		{name: "password", creds: CredentialsFromEnv(env(EnvUsername, "me", EnvPassword, "pa55-secret")), secret: "pa55-secret"},
		{name: "bearer token", creds: CredentialsFromEnv(env(EnvBearerToken, "b3arer-secret")), secret: "b3arer-secret"},
	}
	for _, kind := range kinds {
		for _, r := range routes() {
			t.Run(kind.name+" through "+r.name, func(t *testing.T) {
				g := NewWithT(t)
				trusted.reset()
				other.reset()
				given := givenFor(t, kind.creds, trusted.base)
				given.OverHTTP = true

				res := auditOne(t, RepositoryOptions{Given: given}, r.binding(t, f, trusted.base, other.base))

				g.Expect(other.seen()).NotTo(BeEmpty(), "the audit asked the other server (result %s: %s)", res.Result, res.Reason)
				for _, seen := range other.seen() {
					g.Expect(seen).NotTo(ContainSubstring(kind.secret))
				}
				if r.alsoTrusted {
					g.Expect(strings.Join(trusted.seen(), "\n")).To(ContainSubstring(kind.secret), "the server they are for gets them")
				}
			})
		}
	}
}

// env is a getenv of the given names and values.
func env(pairs ...string) func(string) string {
	values := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		values[pairs[i]] = pairs[i+1]
	}
	return func(name string) string { return values[name] }
}
