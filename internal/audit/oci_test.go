package audit

import (
	"context"
	"net"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// artifactDigest is the digest of the OCI artifact the tests' bindings were
// applied from.
const artifactDigest = "sha256:" + "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f"

// withArtifact records the source as the controller does for a
// Kustomization applying from an OCIRepository: the artifact's revision
// and digest, and its git origin as repository and commit.
func withArtifact(repository string) bindingOption {
	return withSource(func(s *embedopsv1.DecisionSource) {
		s.Revision = "latest@" + artifactDigest
		s.Artifact = artifactDigest
		s.Repository = repository
	})
}

func TestAuditVerifiesAnArtifactFromItsOriginCommit(t *testing.T) {
	g := NewWithT(t)
	commit, repo := fluxRepository(t)
	binding := bindingFor(t, fluxRendered(), commit, withFlux(fluxSpec), withArtifact("https://git.example.com/fleet.git"))

	res := Audit(context.Background(), repo.repo, binding, Options{})

	g.Expect(res.Result).To(Equal(Verified), "reason: %s, differences: %v", res.Reason, res.Differences)
	g.Expect(res.Artifact).To(Equal(artifactDigest))
	g.Expect(res.RecordedCommit).To(Equal(commit))
	g.Expect(res.OriginCommit).To(Equal(commit))
}

// TestAuditNamesTheArtifactItCannotVerify: every way an artifact's origin
// fails to verify is Unverifiable, naming the artifact's digest.
func TestAuditNamesTheArtifactItCannotVerify(t *testing.T) {
	commit, repo := fluxRepository(t)
	cases := []struct {
		name    string
		options []bindingOption
		repos   RepositoryOptions
		reason  []string
	}{{
		name:    "an unreachable origin",
		options: []bindingOption{withArtifact(closedURL(t))},
		repos:   RepositoryOptions{CacheDir: t.TempDir()},
		reason:  []string{"opening the repository", "cloning"},
	}, {
		name:    "an origin without the commit",
		options: []bindingOption{withArtifact("https://git.example.com/fleet.git"), withSource(func(s *embedopsv1.DecisionSource) { s.Commit = strings.Repeat("1", 40) })},
		repos:   RepositoryOptions{Path: repo.dir},
		reason:  []string{"is not in the repository"},
	}, {
		name:    "an artifact pushed from a subdirectory",
		options: []bindingOption{withArtifact("https://git.example.com/fleet.git"), withSource(func(s *embedopsv1.DecisionSource) { s.Path = "./deploy" })},
		repos:   RepositoryOptions{Path: repo.dir},
		reason:  []string{"rendered from the repository's root", "does not exist"},
	}, {
		name: "an artifact without origin annotations",
		options: []bindingOption{withArtifact(""), withSource(func(s *embedopsv1.DecisionSource) {
			s.Commit = ""
		})},
		repos:  RepositoryOptions{Path: repo.dir},
		reason: []string{"cannot be traced to git", "org.opencontainers.image.revision"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			binding := bindingFor(t, fluxRendered(), commit, append([]bindingOption{withFlux(fluxSpec)}, tc.options...)...)

			results := All(context.Background(), tc.repos, []embedopsv1.ModelCacheBinding{*binding}, Options{})

			g.Expect(results).To(HaveLen(1))
			g.Expect(results[0].Result).To(Equal(Unverifiable), results[0].Reason)
			g.Expect(results[0].Reason).To(ContainSubstring(artifactDigest))
			for _, part := range tc.reason {
				g.Expect(results[0].Reason).To(ContainSubstring(part))
			}
			g.Expect(results[0].Artifact).To(Equal(artifactDigest))
		})
	}
}

// closedURL is an HTTP repository URL on a loopback port nothing listens
// on: connecting is refused at once.
func closedURL(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := listener.Addr().String()
	if err := listener.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + address + "/origin.git"
}
