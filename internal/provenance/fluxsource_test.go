package provenance_test

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/provenance"
	"github.com/embedops/embedops/test/harness"
)

const (
	ociDigest   = "sha256:" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	ociRevision = "latest@" + ociDigest
	originURL   = "http://127.0.0.1:9999/origin.git"
)

// ociFixture creates an OCIRepository "artifacts" whose artifact has the
// given revision and metadata, and a Kustomization "apps" applying
// ./clusters/dev from it with the given status.
func ociFixture(t *testing.T, c client.Client, namespace, artifactRevision string, metadata map[string]any, status map[string]any) {
	t.Helper()
	g := NewWithT(t)
	repo := object("source.toolkit.fluxcd.io/v1", "OCIRepository", namespace, "artifacts", map[string]any{
		"spec": map[string]any{"interval": "1m", "url": "oci://127.0.0.1:5000/manifests"},
	})
	g.Expect(c.Create(t.Context(), repo)).To(Succeed())
	repo.Object["status"] = map[string]any{"artifact": map[string]any{
		"revision": artifactRevision, "digest": ociDigest, "path": "ocirepository/x.tar.gz",
		"url": "http://127.0.0.1/x.tar.gz", "lastUpdateTime": "2026-11-30T12:00:00Z", "metadata": metadata,
	}}
	g.Expect(c.Status().Update(t.Context(), repo)).To(Succeed())
	ks := object("kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace, "apps", map[string]any{
		"spec": map[string]any{"interval": "1m", "path": "./clusters/dev", "prune": true,
			"sourceRef": map[string]any{"kind": "OCIRepository", "name": "artifacts"}},
	})
	g.Expect(c.Create(t.Context(), ks)).To(Succeed())
	ks.Object["status"] = status
	g.Expect(c.Status().Update(t.Context(), ks)).To(Succeed())
}

func originMetadata() map[string]any {
	return map[string]any{
		provenance.OCISourceAnnotation:   originURL,
		provenance.OCIRevisionAnnotation: "main@sha1:" + sha1Hex,
	}
}

func TestResolveFluxOCIRecordsTheOriginCommit(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	ociFixture(t, env.Client, namespace, ociRevision, originMetadata(), map[string]any{
		"lastAttemptedRevision": ociRevision, "inventory": inventory(namespace),
	})
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)

	res, err := resolver(env.Client).Resolve(t.Context(), es)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(BeEmpty(), res.Message)
	g.Expect(res.Source).To(Equal(embedopsv1.DecisionSource{
		Method: embedopsv1.SourceFlux, Revision: ociRevision, Commit: sha1Hex, Repository: originURL,
		Artifact: ociDigest, Path: "./clusters/dev",
		ObjectRef: &embedopsv1.SourceObjectReference{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: namespace, Name: "apps"},
		Render:    &embedopsv1.RenderInputs{Spec: `{"path":"./clusters/dev"}`},
		DecidedAt: decidedAt,
	}))
}

// TestResolveFluxOCIReadsTheAppliedOriginOfAnOlderArtifact: when the
// OCIRepository has moved on, the origin of the artifact being applied is
// kustomize-controller's lastAppliedOriginRevision.
func TestResolveFluxOCIReadsTheAppliedOriginOfAnOlderArtifact(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	newer := "latest@sha256:" + strings.Repeat("c", 64)
	older := strings.Repeat("1", 40)
	ociFixture(t, env.Client, namespace, newer, originMetadata(), map[string]any{
		"lastAttemptedRevision": ociRevision, "lastAppliedRevision": ociRevision,
		"lastAppliedOriginRevision": "sha1:" + older, "inventory": inventory(namespace),
	})
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)

	res, err := resolver(env.Client).Resolve(t.Context(), es)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(BeEmpty(), res.Message)
	g.Expect(res.Source.Commit).To(Equal(older))
	g.Expect(res.Source.Repository).To(Equal(originURL))
	g.Expect(res.Source.Artifact).To(Equal(ociDigest))
}

// TestResolveFluxOCIWithoutOrigin: an artifact that cannot be traced to git
// is recorded with its digest and no commit, NotGitSource naming the digest
// and the missing annotation.
func TestResolveFluxOCIWithoutOrigin(t *testing.T) {
	cases := map[string]struct {
		metadata map[string]any
		missing  string
	}{
		"no annotations": {metadata: nil, missing: provenance.OCIRevisionAnnotation},
		"no source":      {metadata: map[string]any{provenance.OCIRevisionAnnotation: "main@sha1:" + sha1Hex}, missing: provenance.OCISourceAnnotation},
		"not a commit":   {metadata: map[string]any{provenance.OCISourceAnnotation: originURL, provenance.OCIRevisionAnnotation: "v1.2.3"}, missing: `"v1.2.3"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			namespace := harness.Namespace(t, env.Client)
			ociFixture(t, env.Client, namespace, ociRevision, tc.metadata, map[string]any{
				"lastAttemptedRevision": ociRevision, "inventory": inventory(namespace),
			})
			es := server(t, env.Client, namespace, fluxLabels(namespace), nil)

			res, err := resolver(env.Client).Resolve(t.Context(), es)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Reason).To(Equal(embedopsv1.NotGitSourceReason))
			g.Expect(res.Message).To(ContainSubstring(ociRevision))
			g.Expect(res.Message).To(ContainSubstring(tc.missing))
			g.Expect(res.Source.Method).To(Equal(embedopsv1.SourceFlux))
			g.Expect(res.Source.Artifact).To(Equal(ociDigest))
			g.Expect(res.Source.Commit).To(BeEmpty())
			g.Expect(res.Source.Repository).To(BeEmpty())
		})
	}
}

// TestResolveFluxRecordsGitRepositoryIncludes: spec.include with the
// included revisions and recurseSubmodules are recorded as render inputs.
func TestResolveFluxRecordsGitRepositoryIncludes(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	revision := "main@sha1:" + sha1Hex
	fluxFixture(t, env.Client, namespace, map[string]any{
		"lastAttemptedRevision": revision, "lastAppliedRevision": revision, "inventory": inventory(namespace),
	})
	shared := object("source.toolkit.fluxcd.io/v1", "GitRepository", namespace, "shared", map[string]any{
		"spec": map[string]any{"interval": "1m", "url": "http://127.0.0.1:9999/shared.git"},
	})
	g.Expect(env.Client.Create(t.Context(), shared)).To(Succeed())
	models := object("source.toolkit.fluxcd.io/v1", "GitRepository", namespace, "models", nil)
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(models), models)).To(Succeed())
	models.Object["spec"].(map[string]any)["recurseSubmodules"] = true
	models.Object["spec"].(map[string]any)["include"] = []any{
		map[string]any{"repository": map[string]any{"name": "shared"}, "fromPath": "./deploy/"},
		map[string]any{"repository": map[string]any{"name": "missing"}, "toPath": "vendor/x"},
	}
	g.Expect(env.Client.Update(t.Context(), models)).To(Succeed())
	models.Object["status"] = map[string]any{"includedArtifacts": []any{map[string]any{
		"revision": "main@sha1:" + strings.Repeat("2", 40), "digest": ociDigest, "path": "p", "url": "http://127.0.0.1/p",
		"lastUpdateTime": "2026-11-30T12:00:00Z",
	}}}
	g.Expect(env.Client.Status().Update(t.Context(), models)).To(Succeed())
	es := server(t, env.Client, namespace, fluxLabels(namespace), nil)

	res, err := resolver(env.Client).Resolve(t.Context(), es)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Reason).To(BeEmpty(), res.Message)
	var inputs embedopsv1.GitSourceInputs
	g.Expect(json.Unmarshal([]byte(res.Source.Render.Source), &inputs)).To(Succeed())
	g.Expect(inputs).To(Equal(embedopsv1.GitSourceInputs{
		RecurseSubmodules: true,
		Include: []embedopsv1.GitInclude{
			{Name: "shared", Repository: "http://127.0.0.1:9999/shared.git", Revision: "main@sha1:" + strings.Repeat("2", 40), FromPath: "deploy", ToPath: "shared"},
			{Name: "missing", ToPath: "vendor/x"},
		},
	}))
}
