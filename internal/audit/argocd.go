package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// argoSpec is the part of an Argo CD Application a binding records (argo-cd
// pkg/apis/application/v1alpha1/types.go, ApplicationSpec).
type argoSpec struct {
	Source      *argoSource  `json:"source,omitempty"`
	Sources     []argoSource `json:"sources,omitempty"`
	Destination struct {
		Namespace string `json:"namespace,omitempty"`
	} `json:"destination"`
}

// argoSource mirrors argo-cd's ApplicationSource.
type argoSource struct {
	RepoURL        string          `json:"repoURL"`
	Path           string          `json:"path,omitempty"`
	TargetRevision string          `json:"targetRevision,omitempty"`
	Helm           *argoHelm       `json:"helm,omitempty"`
	Kustomize      *argoKustomize  `json:"kustomize,omitempty"`
	Directory      *argoDirectory  `json:"directory,omitempty"`
	Plugin         json.RawMessage `json:"plugin,omitempty"`
	Chart          string          `json:"chart,omitempty"`
	Ref            string          `json:"ref,omitempty"`
	Name           string          `json:"name,omitempty"`
}

// argo renders one source of an Application, as Argo CD's repo-server does
// (argo-cd reposerver/repository/repository.go, GenerateManifests).
type argo struct {
	raw         string
	source      argoSource
	appName     string
	destination string
	// refs are the trees of `ref` sources at their recorded revisions, for
	// `$ref/...` value files.
	refs map[string]*object.Tree
	objs *objects
}

func (a *argo) key() string {
	return "argo\x00" + a.raw + "\x00" + a.source.RepoURL + "\x00" + a.source.Path
}

// namespace is the destination namespace, where Argo CD applies namespaced
// objects that name none.
func (a *argo) namespace() string { return a.destination }

// argoRecipeFor decodes the recorded Application settings, strictly: a
// field the audit does not know makes it Unverifiable.
func argoRecipeFor(repo *git.Repository, source embedopsv1.DecisionSource) (recipe, string) {
	var spec argoSpec
	decoder := json.NewDecoder(bytes.NewReader([]byte(source.Render.Spec)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&spec); err != nil {
		return nil, fmt.Sprintf("the recorded Application sources are not reproduced by the audit: %v", err)
	}
	a := &argo{raw: source.Render.Spec, appName: source.ObjectRef.Name, destination: spec.Destination.Namespace,
		refs: map[string]*object.Tree{}, objs: newObjects(repo.Storer)}
	sources := spec.Sources
	if spec.Source != nil {
		sources = []argoSource{*spec.Source}
	}
	found := false
	for i, s := range sources {
		if s.Ref != "" {
			if reason := a.addRef(repo, source, s, i); reason != "" {
				return nil, reason
			}
		}
		recorded := s.RepoURL == source.Repository && s.Path == source.Path && s.Chart == "" && s.Path != ""
		if !found && (recorded || len(sources) == 1) {
			a.source, found = s, true
		}
	}
	if !found {
		return nil, fmt.Sprintf("the recorded Application has no git source %s at path %q", source.Repository, source.Path)
	}
	return a, a.source.unsupported()
}

// addRef keeps the tree of a `ref` source for `$ref/` value files: only one
// of the binding's own repository can be read.
func (a *argo) addRef(repo *git.Repository, source embedopsv1.DecisionSource, s argoSource, index int) string {
	revisions := source.Render.Revisions
	if index >= len(revisions) {
		return ""
	}
	if s.RepoURL != source.Repository {
		a.refs[s.Ref] = nil // named, unreadable: reported when used
		return ""
	}
	commit, err := repo.CommitObject(plumbing.NewHash(revisions[index]))
	if err != nil {
		return fmt.Sprintf("the $%s source's revision %s is not in the repository: %v", s.Ref, revisions[index], err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return fmt.Sprintf("reading the $%s source's tree: %v", s.Ref, err)
	}
	a.refs[s.Ref] = tree
	return ""
}

// unsupported says which setting of the source the audit cannot reproduce.
func (s argoSource) unsupported() string {
	switch {
	case len(s.Plugin) > 0:
		return "the Application renders with a config management plugin, which the audit cannot run"
	case s.Kustomize != nil:
		return s.Kustomize.unsupported()
	}
	return ""
}

// build renders the source by its type: explicit, else discovered
// (argo-cd util/app/discovery/discovery.go: a kustomization file makes it
// Kustomize, else a Chart.yaml Helm, else a plain directory).
func (a *argo) build(fs *treeFS, dir string) *rendering {
	if !fs.IsDir(dir) {
		return &rendering{err: errPathNotFound}
	}
	switch {
	case a.source.Kustomize != nil && a.source.Helm == nil && a.source.Directory == nil:
		return a.kustomize(fs, dir)
	case a.source.Helm != nil && a.source.Kustomize == nil && a.source.Directory == nil:
		return a.helm(fs, dir)
	case a.source.Directory != nil && a.source.Helm == nil && a.source.Kustomize == nil:
		return a.directory(fs, dir)
	case a.source.Helm != nil || a.source.Kustomize != nil || a.source.Directory != nil:
		return &rendering{err: fmt.Errorf("multiple application sources defined")}
	case hasKustomization(fs, dir):
		return a.kustomize(fs, dir)
	case fs.Exists(dir + "/Chart.yaml"):
		return a.helm(fs, dir)
	}
	return a.directory(fs, dir)
}

// refFile reads `$ref/path` from the ref source's tree.
func (a *argo) refFile(p string) ([]byte, bool, error) {
	ref, rest, _ := strings.Cut(strings.TrimPrefix(p, "$"), "/")
	tree, named := a.refs[ref]
	if !named {
		return nil, false, nil
	}
	if tree == nil {
		return nil, true, fmt.Errorf("%s is in another repository than the one audited", p)
	}
	entry, err := a.objs.lookup(tree, strings.TrimPrefix(rest, "/"))
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", p, err)
	}
	data, err := a.objs.blob(entry.Hash)
	return data, true, err
}
