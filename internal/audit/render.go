package audit

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/object"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/yaml"
)

var (
	// errPathNotFound means the rendered path is not a directory of the tree.
	errPathNotFound = errors.New("path does not exist")
	// errRepository wraps failures to read the repository, which say nothing
	// about the manifests in it.
	errRepository = errors.New("reading the repository")
)

// kustomizeMu serialises builds: kustomize keeps its OpenAPI schema in a
// package variable, which builds read and may replace.
var kustomizeMu sync.Mutex

// defaultSchema restores kustomize's built-in OpenAPI schema when something
// replaced it. A kustomization's openapi field replaces the schema for every
// later build in the process, and blocks the openapi field of later bases;
// kustomize-controller resets it around every build, but parsing it again
// costs far more than a build, so it is reset only after it may have changed.
func defaultSchema(changed bool) {
	if changed || openapi.GetSchemaVersion() != openapi.DefaultOpenAPI {
		openapi.ResetOpenAPI()
	}
}

// rendering is the outcome of one kustomize build.
type rendering struct {
	// resources are the rendered objects as a YAML stream.
	resources []byte
	// err is why the build failed; it wraps errPathNotFound when the path is
	// not a directory.
	err error
}

// footprint is the reads one build made, and the builds already done over
// trees that answer them: keyed by what the reads saw.
type footprint struct {
	accesses []access
	results  map[string]*rendering
}

// key is what a tree answers to the footprint's reads.
func (f *footprint) key(objs *objects, root *object.Tree) (string, error) {
	var b strings.Builder
	for _, a := range f.accesses {
		token, err := objs.token(root, a)
		if err != nil {
			return "", err
		}
		b.WriteString(token)
		b.WriteByte(0)
	}
	return b.String(), nil
}

// recipe renders a directory of a commit's tree: plainly with kustomize,
// as a Flux Kustomization, or as an Argo CD source.
type recipe interface {
	// key tells recipes apart: builds are reused only within one recipe.
	key() string
	// build renders dir from fs.
	build(fs *treeFS, dir string) *rendering
}

// plain builds a directory with kustomize alone, for sources that record
// no GitOps object's settings.
type plain struct{}

func (plain) key() string { return "plain" }

func (plain) build(fs *treeFS, dir string) *rendering { return build(fs, dir) }

// renderer builds directories of one repository's commits, reusing a build
// for any commit whose tree answers that build's reads the same way.
type renderer struct {
	objects    *objects
	footprints map[string][]*footprint
	// renders counts the builds run.
	renders int
}

// newRenderer returns a renderer over a repository's objects.
func newRenderer(objs *objects) *renderer {
	return &renderer{objects: objs, footprints: map[string][]*footprint{}}
}

// render builds dir at a commit's root tree with a recipe, or returns an
// equal earlier build.
func (r *renderer) render(root *object.Tree, dir string, rc recipe) *rendering {
	slot := dir + "\x00" + rc.key()
	for _, f := range r.footprints[slot] {
		key, err := f.key(r.objects, root)
		if err != nil {
			return &rendering{err: fmt.Errorf("%w: %w", errRepository, err)}
		}
		if result, ok := f.results[key]; ok {
			return result
		}
	}
	fs := newTreeFS(root, r.objects)
	result := rc.build(fs, dir)
	r.renders++
	if fs.err != nil {
		return &rendering{err: fmt.Errorf("%w: %w", errRepository, fs.err)}
	}
	f := r.footprintOf(slot, fs.accesses)
	key, err := f.key(r.objects, root)
	if err != nil {
		return &rendering{err: fmt.Errorf("%w: %w", errRepository, err)}
	}
	f.results[key] = result
	return result
}

// footprintOf returns the known footprint of a slot (a directory and a
// recipe) with exactly these reads, or adds one.
func (r *renderer) footprintOf(slot string, reads map[access]bool) *footprint {
	accesses := make([]access, 0, len(reads))
	for a := range reads {
		accesses = append(accesses, a)
	}
	slices.SortFunc(accesses, func(a, b access) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return int(a.kind) - int(b.kind)
	})
	for _, f := range r.footprints[slot] {
		if slices.Equal(f.accesses, accesses) {
			return f
		}
	}
	f := &footprint{accesses: accesses, results: map[string]*rendering{}}
	r.footprints[slot] = append(r.footprints[slot], f)
	return f
}

// build renders dir as kustomize-controller does: with its kustomization
// file, or one generated over the directory's manifests when it has none;
// loading files from anywhere in the repository; no plugins beyond the
// built-in ones.
func build(fs *treeFS, dir string) (result *rendering) {
	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	defaultSchema(false)
	defer func() {
		defaultSchema(fs.openAPI)
		if r := recover(); r != nil {
			result = &rendering{err: fmt.Errorf("kustomize panicked: %v", r)}
		}
	}()
	if !fs.IsDir(dir) {
		return &rendering{err: errPathNotFound}
	}
	if err := ensureKustomization(fs, dir); err != nil {
		return &rendering{err: err}
	}
	options := krusty.MakeDefaultOptions()
	options.LoadRestrictions = kustypes.LoadRestrictionsNone
	resources, err := krusty.MakeKustomizer(options).Run(fs, dir)
	if err != nil {
		return &rendering{err: fmt.Errorf("kustomize build: %w", err)}
	}
	data, err := resources.AsYaml()
	if err != nil {
		return &rendering{err: fmt.Errorf("encoding the build: %w", err)}
	}
	return &rendering{resources: data}
}

// ensureKustomization writes a kustomization over dir's manifests when dir
// has none, as kustomize-controller does: every .yaml and .yml file below
// dir, and every subdirectory with its own kustomization in place of its
// content.
func ensureKustomization(fs filesys.FileSystem, dir string) error {
	if hasKustomization(fs, dir) {
		return nil
	}
	root := "/" + strings.TrimPrefix(path.Clean("/"+dir), "/")
	var resources []string
	err := fs.Walk(dir, func(p string, info os.FileInfo, err error) error {
		switch {
		case err != nil:
			return err
		case filepath.ToSlash(p) == root:
			return nil
		case info.IsDir() && hasKustomization(fs, p):
			resources = append(resources, resourcePath(root, p))
			return filepath.SkipDir
		case info.IsDir():
			return nil
		}
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" {
			resources = append(resources, resourcePath(root, p))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing manifests: %w", err)
	}
	generated := kustypes.Kustomization{
		TypeMeta:  kustypes.TypeMeta{APIVersion: kustypes.KustomizationVersion, Kind: kustypes.KustomizationKind},
		Resources: resources,
	}
	if len(resources) == 0 {
		generated.Namespace = "_placeholder" // an empty kustomization is an error
	}
	data, err := yaml.Marshal(generated)
	if err != nil {
		return fmt.Errorf("encoding the generated kustomization: %w", err)
	}
	return fs.WriteFile(path.Join(dir, konfig.DefaultKustomizationFileName()), data)
}

// hasKustomization reports whether dir holds a kustomization file.
func hasKustomization(fs filesys.FileSystem, dir string) bool {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if p := path.Join(dir, name); fs.Exists(p) && !fs.IsDir(p) {
			return true
		}
	}
	return false
}

// resourcePath is p relative to the kustomization's directory root.
func resourcePath(root, p string) string {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(rel)
}
