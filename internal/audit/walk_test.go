package audit

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// succeeding records that a binding took over the storage named name.
func succeeding(name string) bindingOption {
	return func(b *embedopsv1.ModelCacheBinding) {
		b.Name = name + "-2"
		b.Spec.Supersedes, b.Spec.Resources.StorageName = name, name
	}
}

// successionHistory is the search server added at 10Gi (commit 0), grown
// to 20Gi (1), moved to model revision v2 (2) and kept for two days (3).
func successionHistory(t *testing.T) *gitops {
	h := newHistory(t)
	patch := func(size, revision, retainFor string) string {
		p := overlayPatch(2, size) + "    retainFor: " + retainFor + "\n"
		if revision != "" {
			p += "  model:\n    name: BAAI/bge-small-en-v1.5\n    revision: " + revision + "\n"
		}
		return p
	}
	commits := []string{
		h.commit("Add the search server",
			write("base/kustomization.yaml", baseKustomization),
			write("base/embeddingserver.yaml", baseServer),
			write(overlayPath+"/kustomization.yaml", overlayKustomization),
			write(overlayPath+"/search-patch.yaml", patch("10Gi", "", "24h"))),
		h.commit("Grow the search cache", write(overlayPath+"/search-patch.yaml", patch("20Gi", "", "24h"))),
		h.commit("Search with v2", write(overlayPath+"/search-patch.yaml", patch("20Gi", "v2", "24h"))),
		h.commit("Keep search data for two days", write(overlayPath+"/search-patch.yaml", patch("20Gi", "v2", "48h"))),
	}
	dir, repo := h.save()
	return &gitops{dir: dir, repo: repo, commits: commits}
}

func TestAuditStorageOriginWalksThroughASuccessorThatGrewOrRevised(t *testing.T) {
	repo := successionHistory(t)
	commits := repo.commits
	server := func(size, revision string, retainFor time.Duration) *embedopsv1.EmbeddingServer {
		s := prodServer(size)
		s.Spec.Model.Revision = revision
		s.Spec.Cache.RetainFor = &metav1.Duration{Duration: retainFor}
		return s
	}
	nameAt := func(s *embedopsv1.EmbeddingServer, at int) string { return bindingFor(t, s, commits[at]).Name }
	root := nameAt(server("10Gi", "", 24*time.Hour), 0)
	grown := nameAt(server("20Gi", "", 24*time.Hour), 1)
	cases := []struct {
		name          string
		server        *embedopsv1.EmbeddingServer
		recordedAt    int
		options       []bindingOption
		storageOrigin int
	}{
		{"a growth with storage of its own", server("20Gi", "", 24*time.Hour), 1, nil, 1},
		{"a growth that took over the claims", server("20Gi", "", 24*time.Hour), 1, []bindingOption{succeeding(root)}, 0},
		{"a revision with storage of its own", server("20Gi", "v2", 24*time.Hour), 2, nil, 2},
		{"a revision that took over the claims", server("20Gi", "v2", 24*time.Hour), 2, []bindingOption{succeeding(root)}, 0},
		{"a chain of successors", server("20Gi", "v2", 48*time.Hour), 3, []bindingOption{succeeding(root)}, 0},
		{"not past the decision the storage is named after", server("20Gi", "v2", 48*time.Hour), 3, []bindingOption{succeeding(grown)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := Audit(context.Background(), repo.repo, bindingFor(t, tc.server, commits[tc.recordedAt], tc.options...), Options{})
			g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
			g.Expect(res.OriginCommit).To(Equal(commits[tc.recordedAt]), "the decision itself is the edit's")
			g.Expect(res.StorageOriginCommit).To(Equal(commits[tc.storageOrigin]))
		})
	}
}
