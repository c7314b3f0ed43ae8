package audit

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// epoch is when the first commit of a test history is authored; each later
// commit is a day later.
var epoch = time.Date(2025, time.March, 1, 9, 30, 0, 0, time.UTC)

// history builds commits in memory, one file map per commit, with fixed
// authors and dates; save writes them as one packfile into a bare
// repository in a temporary directory, as a clone would have them.
type history struct {
	tb      testing.TB
	objects *memory.Storage
	files   map[string]string
	head    plumbing.Hash
	count   int
}

// newHistory starts an empty history.
func newHistory(tb testing.TB) *history {
	return &history{tb: tb, objects: memory.NewStorage(), files: map[string]string{}}
}

// save writes every object into a new bare repository, packed, with main
// (and HEAD) at the last commit.
func (h *history) save() (string, *git.Repository) {
	h.tb.Helper()
	dir := h.tb.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		h.tb.Fatal(err)
	}
	var hashes []plumbing.Hash
	iter, err := h.objects.IterEncodedObjects(plumbing.AnyObject)
	if err == nil {
		err = iter.ForEach(func(obj plumbing.EncodedObject) error {
			hashes = append(hashes, obj.Hash())
			return nil
		})
	}
	if err != nil {
		h.tb.Fatal(err)
	}
	w, err := repo.Storer.(storer.PackfileWriter).PackfileWriter()
	if err == nil {
		_, err = packfile.NewEncoder(w, h.objects, false).Encode(hashes, 10)
	}
	if err == nil {
		err = w.Close()
	}
	main := plumbing.NewHashReference("refs/heads/main", h.head)
	if err == nil {
		err = repo.Storer.SetReference(main)
	}
	if err == nil {
		err = repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, main.Name()))
	}
	if err != nil {
		h.tb.Fatal(err)
	}
	return dir, repo
}

// change edits the files of the next commit.
type change func(files map[string]string)

// write sets a file's content.
func write(name, content string) change {
	return func(files map[string]string) { files[name] = content }
}

// remove deletes every file under a path.
func remove(prefix string) change {
	return func(files map[string]string) {
		for name := range files {
			if name == prefix || strings.HasPrefix(name, prefix+"/") {
				delete(files, name)
			}
		}
	}
}

// commit applies changes, commits them and returns the commit id.
func (h *history) commit(subject string, changes ...change) string {
	h.tb.Helper()
	for _, c := range changes {
		c(h.files)
	}
	tree := h.tree(".", h.files)
	author := object.Signature{
		Name:  fmt.Sprintf("Dev %d", h.count),
		Email: "dev@example.com",
		When:  epoch.Add(time.Duration(h.count) * 24 * time.Hour),
	}
	c := &object.Commit{Author: author, Committer: author, Message: subject + "\n\nBody.\n", TreeHash: tree}
	if !h.head.IsZero() {
		c.ParentHashes = []plumbing.Hash{h.head}
	}
	h.head = h.store(c.Encode)
	h.count++
	return h.head.String()
}

// tree stores the tree of files under dir and returns its hash.
func (h *history) tree(dir string, files map[string]string) plumbing.Hash {
	entries := map[string]object.TreeEntry{}
	subdirs := map[string]map[string]string{}
	for name, content := range files {
		first, rest, nested := strings.Cut(name, "/")
		if nested {
			if subdirs[first] == nil {
				subdirs[first] = map[string]string{}
			}
			subdirs[first][rest] = content
			continue
		}
		entries[first] = object.TreeEntry{Name: first, Mode: filemode.Regular, Hash: h.blob(content)}
	}
	for name, sub := range subdirs {
		entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h.tree(path.Join(dir, name), sub)}
	}
	t := &object.Tree{}
	for _, e := range entries {
		t.Entries = append(t.Entries, e)
	}
	// Git orders a directory as if its name ended in "/".
	sortName := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(t.Entries, func(i, j int) bool { return sortName(t.Entries[i]) < sortName(t.Entries[j]) })
	return h.store(t.Encode)
}

// blob stores a file's content.
func (h *history) blob(content string) plumbing.Hash {
	obj := h.objects.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err == nil {
		_, err = io.WriteString(w, content)
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		h.tb.Fatal(err)
	}
	hash, err := h.objects.SetEncodedObject(obj)
	if err != nil {
		h.tb.Fatal(err)
	}
	return hash
}

// store encodes an object into the repository.
func (h *history) store(encode func(plumbing.EncodedObject) error) plumbing.Hash {
	obj := h.objects.NewEncodedObject()
	if err := encode(obj); err != nil {
		h.tb.Fatal(err)
	}
	hash, err := h.objects.SetEncodedObject(obj)
	if err != nil {
		h.tb.Fatal(err)
	}
	return hash
}

// Manifests of the GitOps layout the tests audit: a base with the server and
// an overlay that patches it.
const (
	overlayPath = "clusters/prod"

	baseKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- embeddingserver.yaml
`
	baseServer = `apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: search
spec:
  model:
    name: BAAI/bge-small-en-v1.5
  image: ghcr.io/huggingface/text-embeddings-inference:cpu-1.9
`
	overlayKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: prod
resources:
- ../../base
patches:
- path: search-patch.yaml
`
)

// overlayPatch is the overlay's strategic-merge patch of the server.
func overlayPatch(replicas int, size string) string {
	return fmt.Sprintf(`apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: search
spec:
  replicas: %d
  cache:
    storageClassName: fast
    size: %s
`, replicas, size)
}

// gitops is the standard history, commit ids by position: 0 has only a
// README; 1 introduces the server (10Gi); 2 and 3 touch unrelated files; 4
// scales the server (no decision change); 5 grows the cache to 20Gi.
type gitops struct {
	dir     string
	repo    *git.Repository
	commits []string
}

func newGitops(tb testing.TB) *gitops {
	h := newHistory(tb)
	g := &gitops{}
	g.commits = append(g.commits,
		h.commit("Initial commit", write("README.md", "# fleet\n")),
		h.commit("Add the search server",
			write("base/kustomization.yaml", baseKustomization),
			write("base/embeddingserver.yaml", baseServer),
			write(overlayPath+"/kustomization.yaml", overlayKustomization),
			write(overlayPath+"/search-patch.yaml", overlayPatch(2, "10Gi"))),
		h.commit("Document the fleet", write("README.md", "# fleet\n\nProduction servers.\n")),
		h.commit("Add a dashboard", write("monitoring/dashboard.yaml", "kind: ConfigMap\n")),
		h.commit("Scale search to 3 replicas", write(overlayPath+"/search-patch.yaml", overlayPatch(3, "10Gi"))),
		h.commit("Grow the search cache", write(overlayPath+"/search-patch.yaml", overlayPatch(3, "20Gi"))),
	)
	g.dir, g.repo = h.save()
	return g
}

// prodServer is the server the overlay renders, written out by hand.
func prodServer(size string) *embedopsv1.EmbeddingServer {
	quantity := resource.MustParse(size)
	return &embedopsv1.EmbeddingServer{
		ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: "prod"},
		Spec: embedopsv1.EmbeddingServerSpec{
			Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"},
			Cache: embedopsv1.CacheSpec{StorageClassName: "fast", Size: &quantity},
		},
	}
}

// bindingOption edits a binding fixture.
type bindingOption func(*embedopsv1.ModelCacheBinding)

// bindingFor is the binding the controller records for a server's decision
// at a commit of overlayPath.
func bindingFor(tb testing.TB, server *embedopsv1.EmbeddingServer, commit string, opts ...bindingOption) *embedopsv1.ModelCacheBinding {
	tb.Helper()
	d, err := decision.For(server)
	if err != nil || d == nil {
		tb.Fatalf("deciding %s: %v", server.Name, err)
	}
	b := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: decision.BindingName(d), Namespace: server.Namespace},
		Spec: embedopsv1.ModelCacheBindingSpec{
			Identity: d.Identity,
			Decision: d.Decision,
			Source: embedopsv1.DecisionSource{
				Method:     embedopsv1.SourceFlux,
				Revision:   "main@sha1:" + commit,
				Commit:     commit,
				Repository: "https://git.example.com/fleet.git",
				Path:       "./" + overlayPath,
			},
		},
	}
	for _, opt := range opts {
		opt(b)
	}
	return b
}

// withSource edits the recorded source.
func withSource(edit func(*embedopsv1.DecisionSource)) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) { edit(&b.Spec.Source) }
}

// withDecision edits the recorded decision, leaving its digest alone.
func withDecision(edit func(*embedopsv1.CacheDecision)) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) { edit(&b.Spec.Decision) }
}
