package audittest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// Manifests of the GitOps layout the audits render: a base with the search
// server and an overlay, OverlayPath, that patches it into namespace prod.
const (
	// OverlayPath is the overlay's directory, the path bindings record.
	OverlayPath = "clusters/prod"
	// BaseKustomization lists the base's server.
	BaseKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- embeddingserver.yaml
`
	// BaseServer is the search server with the default image.
	BaseServer = `apiVersion: embedops.dev/v1alpha1
kind: EmbeddingServer
metadata:
  name: search
spec:
  model:
    name: BAAI/bge-small-en-v1.5
  image: ` + embedopsv1.DefaultImage + "\n"
	// OverlayKustomization puts the base in prod and patches it.
	OverlayKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: prod
resources:
- ../../base
patches:
- path: search-patch.yaml
`
)

// OverlayPatch is the overlay's strategic-merge patch of the server.
func OverlayPatch(replicas int, size string) string {
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

// ProdServer is the server the overlay renders, written out by hand.
func ProdServer(size string) *embedopsv1.EmbeddingServer {
	quantity := resource.MustParse(size)
	return &embedopsv1.EmbeddingServer{
		ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: "prod"},
		Spec: embedopsv1.EmbeddingServerSpec{
			Model: embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5"},
			Cache: embedopsv1.CacheSpec{StorageClassName: "fast", Size: &quantity},
		},
	}
}

// Binding is the binding the controller records for a server's decision,
// applied by Flux from OverlayPath at commit.
func Binding(server *embedopsv1.EmbeddingServer, commit string) (*embedopsv1.ModelCacheBinding, error) {
	d, err := decision.For(server)
	if err != nil {
		return nil, fmt.Errorf("deciding %s: %w", server.Name, err)
	}
	if d == nil {
		return nil, fmt.Errorf("server %s has no cache decision", server.Name)
	}
	return &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: decision.BindingName(d), Namespace: server.Namespace},
		Spec: embedopsv1.ModelCacheBindingSpec{
			Identity: d.Identity,
			Decision: d.Decision,
			Source: embedopsv1.DecisionSource{
				Method:     embedopsv1.SourceFlux,
				Revision:   "main@sha1:" + commit,
				Commit:     commit,
				Repository: "https://git.example.com/fleet.git",
				Path:       "./" + OverlayPath,
			},
		},
	}, nil
}

// LongHistory is a saved linear history for the origin search benchmarks.
type LongHistory struct {
	// Dir is the bare repository's directory.
	Dir string
	// Commits are the commit ids, oldest first.
	Commits []string
	// Scalings counts the commits that scale the server.
	Scalings int
}

// NewLongHistory saves into dir a linear history of n commits: the first
// introduces the search server at 10Gi, every 100th scales it (a build, no
// decision change), and the rest edit unrelated files. Auditing
// Binding(ProdServer("10Gi"), last commit) walks it all back to the first.
func NewLongHistory(dir string, n int) (*LongHistory, error) {
	h := NewHistory()
	l := &LongHistory{Dir: dir}
	l.Commits = append(l.Commits, h.Commit("Add the search server",
		Write("README.md", "# fleet\n"),
		Write("base/kustomization.yaml", BaseKustomization),
		Write("base/embeddingserver.yaml", BaseServer),
		Write(OverlayPath+"/kustomization.yaml", OverlayKustomization),
		Write(OverlayPath+"/search-patch.yaml", OverlayPatch(1, "10Gi"))))
	for i := 1; i < n; i++ {
		if i%100 == 0 {
			l.Scalings++
			l.Commits = append(l.Commits, h.Commit("Scale search",
				Write(OverlayPath+"/search-patch.yaml", OverlayPatch(1+l.Scalings%9, "10Gi"))))
			continue
		}
		note := fmt.Sprintf("docs/note-%02d.md", i%50)
		l.Commits = append(l.Commits, h.Commit("Edit "+note, Write(note, fmt.Sprintf("revision %d\n", i))))
	}
	if _, err := h.Save(dir); err != nil {
		return nil, err
	}
	return l, nil
}
