package populate_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// fetchRevisions adds a commit of testModel for each file set and runs
// populate on it in turn with opts, returning the commits.
func fetchRevisions(g Gomega, hub *hubtest.Hub, opts populate.Options, revisions ...[]hubtest.File) []string {
	var commits []string
	for i, files := range revisions {
		commits = append(commits, hub.AddCommit(testModel, "main", files...))
		opts.Revision = commits[i]
		_, err := populate.Run(context.Background(), opts)
		g.Expect(err).NotTo(HaveOccurred(), "revision %d", i)
	}
	return commits
}

// A run deletes nothing unless asked: without Prune every revision stays.
func TestRunPrunesOnlyWhenAsked(t *testing.T) {
	for _, prune := range []bool{false, true} {
		t.Run("prune="+strconv.FormatBool(prune), func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			hub := hubtest.New(t)
			opts := options(t, hub, dir, &sleeper{})
			opts.Prune = prune

			commits := fetchRevisions(g, hub, opts, revisionFiles(0), revisionFiles(1), revisionFiles(2))

			kept := commits
			if prune {
				kept = commits[1:]
			}
			expectSnapshots(g, dir, kept)
			expectValidLayout(g, dir)
		})
	}
}

// withConfig is files with config.json's content replaced.
func withConfig(files []hubtest.File, content string) []hubtest.File {
	for i := range files {
		if files[i].Name == "config.json" {
			files[i].Data = []byte(content)
		}
	}
	return files
}

// A kept snapshot missing a link still needs the blob its manifest names:
// pruning an older snapshot that names it too keeps it, so the next run
// at the kept commit links it again instead of fetching it.
func TestRunKeepsTheBlobsAKeptManifestNames(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	hub := hubtest.New(t)
	opts := options(t, hub, dir, &sleeper{})
	opts.Prune = true
	commits := fetchRevisions(g, hub, opts, revisionFiles(0), revisionFiles(1))
	config := fileNamed(revisionFiles(1), "config.json")
	g.Expect(os.Remove(filepath.Join(repoDir(dir), "snapshots", commits[1], "config.json"))).To(Succeed())

	commits = append(commits, fetchRevisions(g, hub, opts, withConfig(revisionFiles(2), `{"model_type":"other"}`))...)

	expectSnapshots(g, dir, commits[1:])
	g.Expect(filepath.Join(repoDir(dir), "blobs", blobName(config))).To(BeARegularFile(),
		"the served snapshot's manifest names the blob, though no link reaches it")
	before := len(requestsTo(hub, "/resolve/"))
	opts.Revision = commits[1]
	_, err := populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(requestsTo(hub, "/resolve/")).To(HaveLen(before), "the kept commit is whole again without the hub's files")
	expectValidLayout(g, dir)
}

// A listing without blob ids (a hub mirror lists names only) cannot say
// which blobs the new commit wants: nothing is pruned.
func TestRunDoesNotPruneForAListingWithoutBlobs(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	hub := hubtest.New(t)
	hub.ListNamesOnly()
	opts := options(t, hub, dir, &sleeper{})
	opts.Prune = true

	commits := fetchRevisions(g, hub, opts, revisionFiles(0), revisionFiles(1), revisionFiles(2))

	expectSnapshots(g, dir, commits)
	expectValidLayout(g, dir)
}

// The revision the last run left (.embedops/latest), which the claim's pod
// served, is kept when another commit is fetched and when it is fetched
// again itself (its weights lost); the other complete snapshots go.
func TestRunKeepsTheServedRevision(t *testing.T) {
	for _, tc := range []struct {
		name   string
		served bool // the run fetches the served commit, not a new one
	}{
		{"another commit", false},
		{"the served commit again", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			hub := hubtest.New(t)
			opts := options(t, hub, dir, &sleeper{})
			opts.Prune = true
			commits := fetchRevisions(g, hub, opts, revisionFiles(0), revisionFiles(1))
			opts.Prune = false // a third complete snapshot, and latest still names the second
			commits = append(commits, fetchRevisions(g, hub, opts, revisionFiles(2))...)
			served := commits[1]
			latest, err := os.ReadFile(filepath.Join(repoDir(dir), ".embedops", "latest"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(latest)).To(Equal(served))
			fetch := hub.AddCommit(testModel, "main", revisionFiles(3)...)
			if tc.served {
				fetch = served
				weights := filepath.Join(repoDir(dir), "blobs", blobName(fileNamed(revisionFiles(1), "model.safetensors")))
				g.Expect(os.Remove(weights)).To(Succeed(), "the served snapshot must be fetched again")
			}

			opts.Prune, opts.Revision = true, fetch
			_, err = populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			expectSnapshots(g, dir, slices.Compact([]string{served, fetch}))
			expectValidLayout(g, dir)
		})
	}
}
