package gitops

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	gcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/cli"
	"github.com/embedops/embedops/internal/provenance"
	"github.com/embedops/embedops/test/harness"
)

// ociRepositoryName names the OCIRepository the OCI test applies from.
const ociRepositoryName = "servers-artifact"

// TestFluxAppliesAServerFromAnOCIArtifact pushes a commit's servers as an
// OCI artifact, as `flux push artifact --path=. --source --revision` does,
// to a registry on loopback; real source-controller pulls it and
// kustomize-controller applies it. The binding records the artifact and
// the commit it was built from, and the audit verifies it from git.
func TestFluxAppliesAServerFromAnOCIArtifact(t *testing.T) {
	namespace := cluster.Namespace(t)
	repo := newRepository(t, "oci/"+namespace+".git")
	files := map[string]string{serverFile: serverManifest(harness.DefaultStorageClass, "")}
	commit := repo.commit(t, "Serve bge-small from an artifact", files)
	host := startRegistry(t)
	digest := pushArtifact(t, host, namespace+"/servers", files, repo.url, revisionOf(commit))
	createOCIFluxObjects(t, namespace, "oci://"+host+"/"+namespace+"/servers")
	revision := "latest@" + digest

	step(t, "kustomize-controller applies the artifact and records its origin", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			ks := &unstructured.Unstructured{}
			ks.SetGroupVersionKind(kustomizationGVK)
			g.Expect(cluster.Client.Get(t.Context(), kustomizationKey(namespace), ks)).To(Succeed())
			applied, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision")
			origin, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedOriginRevision")
			g.Expect(applied).To(Equal(revision))
			g.Expect(origin).To(Equal(revisionOf(commit)))
		}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
	})
	var bindingName string
	step(t, "the binding records the artifact and its git origin", func(t *testing.T) {
		g := NewWithT(t)
		server := &embedopsv1.EmbeddingServer{}
		g.Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(t.Context(), serverKey(namespace), server)).To(Succeed())
			g.Expect(server.Status.CacheBinding).NotTo(BeEmpty())
			resolved := apimeta.FindStatusCondition(server.Status.Conditions, embedopsv1.SourceResolvedCondition)
			g.Expect(resolved).NotTo(BeNil())
			g.Expect(resolved.Status).To(Equal(metav1.ConditionTrue), resolved.Message)
		}).WithTimeout(settle).WithPolling(pollInterval).Should(Succeed())
		binding := &embedopsv1.ModelCacheBinding{}
		g.Expect(cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: server.Status.CacheBinding}, binding)).To(Succeed())
		source := binding.Spec.Source
		g.Expect(source.Method).To(Equal(embedopsv1.SourceFlux))
		g.Expect(source.Revision).To(Equal(revision))
		g.Expect(source.Artifact).To(Equal(digest))
		g.Expect(source.Commit).To(Equal(commit))
		g.Expect(source.Repository).To(Equal(repo.url))
		g.Expect(source.Path).To(Equal(serversPath))
		bindingName = binding.Name
	})
	step(t, "audit verifies the binding from the origin commit", func(t *testing.T) {
		results := runAudit(t, namespace, bindingName)
		g := NewWithT(t)
		g.Expect(results).To(HaveLen(1))
		g.Expect(results[0].Result).To(Equal(audit.Verified), "%s %v", results[0].Reason, results[0].Differences)
		g.Expect(results[0].Artifact).To(Equal(digest))
		g.Expect(results[0].RecordedCommit).To(Equal(commit))
		g.Expect(results[0].OriginSubject).To(Equal("Serve bge-small from an artifact"))
	})
}

// startRegistry serves an in-memory OCI registry on loopback for the
// test and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(server.Close)
	return strings.TrimPrefix(server.URL, "http://")
}

// pushArtifact pushes files as a Flux artifact with the origin annotations
// to repository:latest on host and returns its digest. The layout is
// fluxcd/pkg/oci v0.68.1 push.go (Client.Push): an OCI manifest with
// Flux's config media type, one gzipped tarball layer of the directory,
// the metadata as manifest annotations. It is pushed with the OCI
// distribution API's monolithic blob uploads, over plain HTTP.
func pushArtifact(t *testing.T, host, repository string, files map[string]string, source, revision string) string {
	t.Helper()
	g := NewWithT(t)
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, "application/vnd.cncf.flux.config.v1+json")
	img, ok := mutate.Annotations(img, map[string]string{
		provenance.OCISourceAnnotation:     source,
		provenance.OCIRevisionAnnotation:   revision,
		"org.opencontainers.image.created": time.Now().UTC().Format(time.RFC3339),
	}).(gcrv1.Image)
	g.Expect(ok).To(BeTrue())
	layer := static.NewLayer(tarball(t, files), "application/vnd.cncf.flux.content.v1.tar+gzip")
	img, err := mutate.Append(img, mutate.Addendum{Layer: layer})
	g.Expect(err).NotTo(HaveOccurred())

	base := "http://" + host + "/v2/" + repository
	config, err := img.RawConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	configDigest, err := img.ConfigName()
	g.Expect(err).NotTo(HaveOccurred())
	send(t, http.MethodPost, base+"/blobs/uploads/?digest="+configDigest.String(), "", config)
	compressed, err := layer.Compressed()
	g.Expect(err).NotTo(HaveOccurred())
	content, err := io.ReadAll(compressed)
	g.Expect(err).NotTo(HaveOccurred())
	layerDigest, err := layer.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	send(t, http.MethodPost, base+"/blobs/uploads/?digest="+layerDigest.String(), "", content)
	manifest, err := img.RawManifest()
	g.Expect(err).NotTo(HaveOccurred())
	send(t, http.MethodPut, base+"/manifests/latest", string(types.OCIManifestSchema1), manifest)
	digest, err := img.Digest()
	g.Expect(err).NotTo(HaveOccurred())
	return digest.String()
}

// send makes one registry request that must answer 201 Created.
func send(t *testing.T, method, url, contentType string, body []byte) {
	t.Helper()
	g := NewWithT(t)
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(resp.Body)
	g.Expect(resp.StatusCode).To(Equal(http.StatusCreated), "%s %s: %s", method, url, answer)
}

// tarball is files as a gzipped tar.
func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for path, content := range files {
		header := &tar.Header{Name: path, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(header); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// createOCIFluxObjects creates an OCIRepository following the latest tag
// of url over plain HTTP and the Kustomization applying serversPath of it.
func createOCIFluxObjects(t *testing.T, namespace, url string) {
	t.Helper()
	g := NewWithT(t)
	source := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"interval": sourceInterval.String(), "url": url, "ref": map[string]any{"tag": "latest"}, "insecure": true,
	}}}
	source.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	source.SetKind("OCIRepository")
	source.SetNamespace(namespace)
	source.SetName(ociRepositoryName)
	g.Expect(cluster.Client.Create(t.Context(), source)).To(Succeed())
	exprs, err := shippedHealthCheckExprs()
	g.Expect(err).NotTo(HaveOccurred())
	ks := newKustomization(namespace, ociRepositoryName, exprs)
	g.Expect(unstructured.SetNestedField(ks.Object, "OCIRepository", "spec", "sourceRef", "kind")).To(Succeed())
	g.Expect(cluster.Client.Create(t.Context(), ks)).To(Succeed())
}

// runAudit runs `embedops audit -o json` on bindings of namespace, cloning
// into a fresh cache.
func runAudit(t *testing.T, namespace string, bindings ...string) []audit.Result {
	t.Helper()
	g := NewWithT(t)
	var stdout, stderr bytes.Buffer
	root := cli.NewRootCommand()
	root.SetArgs(append([]string{"audit", "--kubeconfig", cluster.Kubeconfig, "-n", namespace,
		"--cache-dir", t.TempDir(), "-o", "json"}, bindings...))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	g.Expect(root.ExecuteContext(t.Context())).To(Succeed(), "embedops audit: %s", stderr.String())
	t.Logf("embedops audit:\n%s", stdout.String())
	var results []audit.Result
	g.Expect(json.Unmarshal(stdout.Bytes(), &results)).To(Succeed())
	return results
}
