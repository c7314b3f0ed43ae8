package gitops

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/embedops/embedops/test/chart"
	"github.com/embedops/embedops/test/harness"
)

// helmReleaseGVK is helm-controller's HelmRelease (embedops' module does
// not depend on Flux's APIs).
var helmReleaseGVK = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}

// startHelmController installs the HelmRelease CRD that `make tools`
// copies into bin/crds/helm and runs bin/helm-controller as
// test/harness runs the other Flux controllers, until the test ends; its
// log is shown when the test failed.
func startHelmController(t *testing.T) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := harness.Binary(root, "crds/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing the HelmRelease CRD: %v", err)
	}
	binary, err := harness.Binary(root, "helm-controller")
	if err != nil {
		t.Fatal(err)
	}
	health := "127.0.0.1:" + freePort(t)
	process, err := harness.StartProcess(t.Context(), harness.ProcessOptions{
		Name:   "helm-controller",
		Binary: binary,
		Args: []string{
			"--enable-leader-election=false",
			"--watch-all-namespaces=true",
			"--metrics-addr=127.0.0.1:" + freePort(t),
			"--health-addr=" + health,
			"--log-encoding=console",
		},
		Kubeconfig: cluster.Kubeconfig,
		LogPath:    filepath.Join(t.TempDir(), "helm-controller.log"),
		ReadyURL:   "http://" + health + "/readyz",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(process.LogTail())
		}
		if err := process.Stop(); err != nil {
			t.Error(err)
		}
	})
}

// freePort is a loopback TCP port free at the time of asking.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// diskFS is the local file system.
func diskFS() filesys.FileSystem { return filesys.MakeFsOnDisk() }

// chartDir is the chart's directory in the working tree.
func chartDir(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, chart.Dir)
}

// chartFiles are the chart's files as committed: path in the repository
// to content.
func chartFiles(t *testing.T) map[string]string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	dir := filepath.Join(root, chart.Dir)
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("reading the chart: %v", err)
	}
	return files
}

// shippedHelmRelease is gitops/flux-helm's HelmRelease, moved into
// namespace, installing into target and following the GitRepository
// source.
func shippedHelmRelease(t *testing.T, namespace, target, source string) *unstructured.Unstructured {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "gitops", "flux-helm", "operator", "helmrelease.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hr := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &hr.Object); err != nil {
		t.Fatalf("reading the shipped HelmRelease: %v", err)
	}
	if hr.GroupVersionKind() != helmReleaseGVK {
		t.Fatalf("the shipped HelmRelease is a %s", hr.GroupVersionKind())
	}
	hr.SetNamespace(namespace)
	for field, value := range map[string]any{"targetNamespace": target, "interval": "1m"} {
		if err := unstructured.SetNestedField(hr.Object, value, "spec", field); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedField(hr.Object, source, "spec", "chart", "spec", "sourceRef", "name"); err != nil {
		t.Fatal(err)
	}
	return hr
}
