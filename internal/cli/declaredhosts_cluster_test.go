package cli

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/embedops/embedops/test/harness"
)

// gitopsCRDs installs Flux's and Argo CD's CRDs into the shared control
// plane once.
var gitopsCRDs struct {
	once sync.Once
	err  error
}

// installGitOpsCRDs installs Flux's and Argo CD's CRDs, from ./bin.
func installGitOpsCRDs(t *testing.T, env *harness.Env) {
	t.Helper()
	gitopsCRDs.once.Do(func() {
		paths, err := harness.ThirdPartyCRDPaths()
		if err == nil {
			_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
		}
		gitopsCRDs.err = err
	})
	if gitopsCRDs.err != nil {
		t.Fatal(gitopsCRDs.err)
	}
}

// gitopsObject is an object of a Flux or Argo CD kind with a spec.
func gitopsObject(apiVersion, kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": spec}}
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

func TestDeclaredHostsAreTheHostsOfTheClustersSources(t *testing.T) {
	g := NewWithT(t)
	env, _ := reconciledCluster(t)
	installGitOpsCRDs(t, env)
	ns := harness.Namespace(t, env.Client)
	// Hosts unique to this namespace: other tests' sources share the cluster.
	host := func(name string) string { return name + "." + ns + ".example" }
	objects := []*unstructured.Unstructured{
		gitopsObject("source.toolkit.fluxcd.io/v1", "GitRepository", ns, "fleet",
			map[string]any{"interval": "1m", "url": "https://" + host("git") + "/fleet.git"}),
		gitopsObject("source.toolkit.fluxcd.io/v1", "OCIRepository", ns, "manifests",
			map[string]any{"interval": "1m", "url": "oci://" + host("registry") + "/manifests"}),
		gitopsObject("source.toolkit.fluxcd.io/v1", "HelmRepository", ns, "charts",
			map[string]any{"interval": "1m", "url": "https://" + host("charts") + "/"}),
		gitopsObject("argoproj.io/v1alpha1", "Application", ns, "models", map[string]any{
			"project":     "default",
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
			"sources": []any{
				map[string]any{"repoURL": "git@" + host("ssh") + ":team/models.git", "path": "apps"},
				map[string]any{"repoURL": "https://" + host("values") + "/values.git", "ref": "values"},
			},
		}),
	}
	for _, obj := range objects {
		g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
	}

	hosts, errs := declaredHosts(context.Background(), env.Client, []string{"allowed.example"})
	g.Expect(errs).To(BeEmpty())
	g.Expect(hosts.Allowed).To(Equal([]string{"allowed.example"}))
	g.Expect(hosts.Cluster).To(And(
		HaveKeyWithValue(host("git"), "GitRepository "+ns+"/fleet"),
		HaveKeyWithValue(host("registry"), "OCIRepository "+ns+"/manifests"),
		HaveKeyWithValue(host("charts"), "HelmRepository "+ns+"/charts"),
		HaveKeyWithValue(host("ssh"), "Application "+ns+"/models"),
		HaveKeyWithValue(host("values"), "Application "+ns+"/models"),
	))
}

func TestDeclaredHostsWithoutAClusterAreTheAllowedOnes(t *testing.T) {
	g := NewWithT(t)
	hosts, errs := declaredHosts(context.Background(), nil, []string{"git.example.com"})
	g.Expect(errs).To(BeEmpty())
	g.Expect(hosts.Cluster).To(BeEmpty())
	g.Expect(hosts.Allowed).To(Equal([]string{"git.example.com"}))
}
