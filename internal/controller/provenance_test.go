package controller

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/provenance"
	"github.com/embedops/embedops/test/fixtures"
)

const (
	gitopsCommit = "89abcdef0123456789abcdef0123456789abcdef"
	gitopsRepo   = "http://127.0.0.1:9999/models.git"
)

// gitopsObject creates an unstructured object and, when status is set,
// writes it through the status subresource if the kind has one.
func gitopsObject(t *testing.T, g *WithT, apiVersion, kind, namespace, name string, content map[string]any, status map[string]any, subresource bool) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: content}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	if !subresource && status != nil {
		obj.Object["status"] = status
	}
	g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
	if subresource && status != nil {
		obj.Object["status"] = status
		g.Expect(env.Client.Status().Update(t.Context(), obj)).To(Succeed())
	}
}

// fluxApps creates the GitRepository "models" and the Kustomization "apps"
// applying ./apps from it, with status.
func fluxApps(t *testing.T, g *WithT, namespace string, status map[string]any) {
	t.Helper()
	gitopsObject(t, g, "source.toolkit.fluxcd.io/v1", "GitRepository", namespace, "models",
		map[string]any{"spec": map[string]any{"interval": "1m", "url": gitopsRepo}}, nil, true)
	gitopsObject(t, g, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace, "apps",
		map[string]any{"spec": map[string]any{"interval": "1m", "path": "./apps", "prune": true,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "models"}}},
		status, true)
}

// appliedStatus is a Kustomization's status once it applied revision with
// the server "tei" in its inventory.
func appliedStatus(namespace, revision string) map[string]any {
	return map[string]any{"lastAttemptedRevision": revision, "lastAppliedRevision": revision, "inventory": map[string]any{
		"entries": []any{map[string]any{"id": namespace + "_tei_embedops.dev_EmbeddingServer", "v": "v1alpha1"}}}}
}

func TestBindingRecordsAFluxSource(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	revision := "main@sha1:" + gitopsCommit
	fluxApps(t, g, namespace, appliedStatus(namespace, revision))
	server := fixtures.EmbeddingServer(namespace, "tei")
	server.Labels = map[string]string{provenance.FluxNameLabel: "apps", provenance.FluxNamespaceLabel: namespace}
	key := createServer(t, g, server)

	source := waitForBinding(t, g, key, "").Spec.Source
	g.Expect(source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(source.Revision).To(Equal(revision))
	g.Expect(source.Commit).To(Equal(gitopsCommit))
	g.Expect(source.Repository).To(Equal(gitopsRepo))
	g.Expect(source.Path).To(Equal("./apps"))
	g.Expect(source.ObjectRef).To(HaveField("Name", "apps"))
}

func TestBindingRecordsAnArgoCDSource(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	gitopsObject(t, g, "argoproj.io/v1alpha1", "Application", namespace, "models",
		map[string]any{"spec": map[string]any{"project": "default",
			"source":      map[string]any{"repoURL": gitopsRepo, "path": "apps/models"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": namespace}}},
		map[string]any{"sync": map[string]any{"revision": gitopsCommit, "status": "Synced"},
			"resources": []any{map[string]any{"group": "embedops.dev", "kind": "EmbeddingServer", "namespace": namespace, "name": "tei", "version": "v1alpha1"}}}, false)
	server := fixtures.EmbeddingServer(namespace, "tei")
	server.Annotations = map[string]string{provenance.TrackingIDAnnotation: namespace + "_models:embedops.dev/EmbeddingServer:" + namespace + "/tei"}
	key := createServer(t, g, server)

	source := waitForBinding(t, g, key, "").Spec.Source
	g.Expect(source.Method).To(Equal(embedopsv1.SourceArgoCD))
	g.Expect(source.Commit).To(Equal(gitopsCommit))
	g.Expect(source.Repository).To(Equal(gitopsRepo))
	g.Expect(source.Path).To(Equal("apps/models"))
	g.Expect(source.ObjectRef).To(HaveField("Kind", "Application"))
}

// TestPendingSourceResolvesWhenFluxCatchesUp: the binding is recorded while
// kustomize-controller is still applying the server (lastAttemptedRevision
// set, the server not in the inventory yet). Once the inventory lists it,
// SourceResolved turns True without anything the controller watches
// changing.
func TestPendingSourceResolvesWhenFluxCatchesUp(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	revision := "main@sha1:" + gitopsCommit
	fluxApps(t, g, namespace, map[string]any{"lastAttemptedRevision": revision})
	server := fixtures.EmbeddingServer(namespace, "tei")
	server.Labels = map[string]string{provenance.FluxNameLabel: "apps", provenance.FluxNamespaceLabel: namespace}
	key := createServer(t, g, server)
	waitForCondition(t, g, key, embedopsv1.SourceResolvedCondition, metav1.ConditionFalse, embedopsv1.SourcePendingReason)
	g.Expect(waitForBinding(t, g, key, "").Spec.Source.Commit).To(Equal(gitopsCommit), "what was being applied is recorded")

	ks := &unstructured.Unstructured{}
	ks.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	ks.SetKind("Kustomization")
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "apps"}, ks)).To(Succeed())
	ks.Object["status"] = appliedStatus(namespace, revision)
	g.Expect(env.Client.Status().Update(t.Context(), ks)).To(Succeed())

	waitForCondition(t, g, key, embedopsv1.SourceResolvedCondition, metav1.ConditionTrue, embedopsv1.SourceResolvedReason)
}

// TestStaleDeclaredRevisionIsReportedNotRecorded: Flux's record wins over
// a hard-coded annotation, with a Warning event.
func TestStaleDeclaredRevisionIsReportedNotRecorded(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	revision := "main@sha1:" + gitopsCommit
	fluxApps(t, g, namespace, appliedStatus(namespace, revision))
	server := fixtures.EmbeddingServer(namespace, "tei")
	server.Labels = map[string]string{provenance.FluxNameLabel: "apps", provenance.FluxNamespaceLabel: namespace}
	server.Annotations = map[string]string{embedopsv1.SourceRevisionAnnotation: "v1.0.0@sha1:0123456789012345678901234567890123456789"}
	key := createServer(t, g, server)

	source := waitForBinding(t, g, key, "").Spec.Source
	g.Expect(source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(source.Commit).To(Equal(gitopsCommit))
	g.Eventually(func(g Gomega) {
		g.Expect(warningEvents(t, g, namespace, "tei", embedopsv1.DeclaredRevisionIgnoredReason)).To(HaveLen(1))
	}).Should(Succeed())
}

// ociApps creates the OCIRepository "artifacts", whose artifact revision
// has the given metadata, and the Kustomization "apps" applying ./apps
// from it.
func ociApps(t *testing.T, g *WithT, namespace, revision string, metadata map[string]any) {
	t.Helper()
	digest := revision[strings.LastIndex(revision, "@")+1:]
	gitopsObject(t, g, "source.toolkit.fluxcd.io/v1", "OCIRepository", namespace, "artifacts",
		map[string]any{"spec": map[string]any{"interval": "1m", "url": "oci://127.0.0.1:5000/apps"}},
		map[string]any{"artifact": map[string]any{"revision": revision, "digest": digest, "path": "p", "url": "http://127.0.0.1/p",
			"lastUpdateTime": "2026-11-30T12:00:00Z", "metadata": metadata}}, true)
	gitopsObject(t, g, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace, "apps",
		map[string]any{"spec": map[string]any{"interval": "1m", "path": "./apps", "prune": true,
			"sourceRef": map[string]any{"kind": "OCIRepository", "name": "artifacts"}}},
		appliedStatus(namespace, revision), true)
}

func TestBindingRecordsTheGitOriginOfAnOCIArtifact(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	ociApps(t, g, namespace, "latest@"+digest, map[string]any{
		provenance.OCISourceAnnotation: gitopsRepo, provenance.OCIRevisionAnnotation: "main@sha1:" + gitopsCommit,
	})
	server := fixtures.EmbeddingServer(namespace, "tei")
	server.Labels = map[string]string{provenance.FluxNameLabel: "apps", provenance.FluxNamespaceLabel: namespace}
	key := createServer(t, g, server)

	source := waitForBinding(t, g, key, "").Spec.Source
	g.Expect(source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(source.Revision).To(Equal("latest@" + digest))
	g.Expect(source.Artifact).To(Equal(digest))
	g.Expect(source.Commit).To(Equal(gitopsCommit))
	g.Expect(source.Repository).To(Equal(gitopsRepo))
	waitForCondition(t, g, key, embedopsv1.SourceResolvedCondition, metav1.ConditionTrue, embedopsv1.SourceResolvedReason)
}

// TestUntraceableOCIArtifactIsRecordedWithItsDigest: an artifact without
// origin annotations holds nothing up; the binding names its digest.
func TestUntraceableOCIArtifactIsRecordedWithItsDigest(t *testing.T) {
	g, namespace := reconciledNamespace(t)
	digest := "sha256:" + strings.Repeat("cd", 32)
	ociApps(t, g, namespace, "latest@"+digest, nil)
	server := fixtures.EmbeddingServer(namespace, "tei")
	server.Labels = map[string]string{provenance.FluxNameLabel: "apps", provenance.FluxNamespaceLabel: namespace}
	key := createServer(t, g, server)

	source := waitForBinding(t, g, key, "").Spec.Source
	g.Expect(source.Method).To(Equal(embedopsv1.SourceFlux))
	g.Expect(source.Artifact).To(Equal(digest))
	g.Expect(source.Commit).To(BeEmpty())
	waitForCondition(t, g, key, embedopsv1.SourceResolvedCondition, metav1.ConditionFalse, embedopsv1.NotGitSourceReason)
}
