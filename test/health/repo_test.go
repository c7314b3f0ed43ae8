package health

import (
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// repoRoot is the repository root, seen from this package.
const repoRoot = "../.."

// renderRepo runs kustomize on a directory of the repository, given
// relative to its root, as `kustomize build` does.
func renderRepo(t *testing.T, dir string) []*resource.Resource {
	t.Helper()
	return renderFS(t, filesys.MakeFsOnDisk(), filepath.Join(repoRoot, dir))
}

// renderFS runs kustomize on dir of fsys with its default load
// restrictions (Argo CD's; Flux allows more), requiring a kustomization
// file rather than generating one as Flux would.
func renderFS(t *testing.T, fsys filesys.FileSystem, dir string) []*resource.Resource {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m.Resources()
}

// sourceTree copies the repository's files into memory at /, leaving out
// .git, what .gitignore names, and what a Flux GitRepository's spec.ignore
// excludes, so that a path rendered from it proves the fetched source holds
// everything the path needs. Relative paths in the tree are relative to /.
func sourceTree(t *testing.T, ignore string) filesys.FileSystem {
	t.Helper()
	var patterns []gitignore.Pattern
	for _, line := range strings.Split(readFile(t, filepath.Join(repoRoot, ".gitignore"))+"\n"+ignore, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, gitignore.ParsePattern(line, nil))
		}
	}
	matcher := gitignore.NewMatcher(patterns)
	mem := filesys.MakeFsInMemory()
	root := os.DirFS(repoRoot)
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if p == ".git" || matcher.Match(strings.Split(p, "/"), d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/", p), data)
	})
	if err != nil {
		t.Fatalf("copying the repository: %v", err)
	}
	return mem
}

// as decodes a rendered resource into T or fails the test.
func as[T any](t *testing.T, r *resource.Resource) T {
	t.Helper()
	var out T
	data, err := r.MarshalJSON()
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		t.Fatalf("decoding %s/%s: %v", r.GetKind(), r.GetName(), err)
	}
	return out
}
