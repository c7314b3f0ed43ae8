package health

import (
	"path/filepath"
	"strings"
	"testing"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/logger"
	. "github.com/onsi/gomega"
	flag "github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/resource"
)

// clusterScoped are the kinds the renderings may hold without a namespace.
var clusterScoped = map[string]bool{
	"Namespace":                true,
	"CustomResourceDefinition": true,
	"ClusterRole":              true,
	"ClusterRoleBinding":       true,
}

func TestRenderNamespaces(t *testing.T) {
	tests := []struct {
		dir       string
		namespace string
		kinds     []string
	}{
		{dir: "default", namespace: "embedops-system", kinds: []string{
			"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
			"Role", "RoleBinding", "Deployment", "Service",
		}},
		{dir: "flux", namespace: "flux-system", kinds: []string{"Kustomization"}},
		// config/argocd is a Component patching the user's argocd-cm:
		// argocd_patch_test.go renders it over one.
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			g := NewWithT(t)
			kinds := map[string]bool{}
			for _, r := range render(t, tt.dir) {
				kinds[r.GetKind()] = true
				if clusterScoped[r.GetKind()] {
					g.Expect(r.GetNamespace()).To(BeEmpty(), "%s/%s", r.GetKind(), r.GetName())
					continue
				}
				g.Expect(r.GetNamespace()).To(Equal(tt.namespace), "%s/%s", r.GetKind(), r.GetName())
			}
			for _, k := range tt.kinds {
				g.Expect(kinds).To(HaveKey(k))
			}
		})
	}
}

func TestDefaultWiring(t *testing.T) {
	g := NewWithT(t)
	byKind := map[string][]*resource.Resource{}
	for _, r := range render(t, "default") {
		byKind[r.GetKind()] = append(byKind[r.GetKind()], r)
		switch r.GetKind() {
		case "Namespace":
			g.Expect(r.GetName()).To(Equal("embedops-system"))
		case "CustomResourceDefinition":
			g.Expect(r.GetName()).To(HaveSuffix(".embedops.dev"))
		default:
			g.Expect(r.GetName()).To(HavePrefix("embedops-"), "%s/%s", r.GetKind(), r.GetName())
		}
	}
	g.Expect(byKind["ServiceAccount"]).To(HaveLen(1))
	sa := byKind["ServiceAccount"][0].GetName()
	g.Expect(byKind["CustomResourceDefinition"]).To(HaveLen(2))

	deployment := decode[appsv1.Deployment](t, byKind["Deployment"])
	g.Expect(deployment.Spec.Template.Spec.ServiceAccountName).To(Equal(sa))

	// The manager role and the metrics auth role, both bound to the
	// controller; metrics-reader is left for the scraper to bind.
	clusterRoles := map[string]bool{}
	for _, r := range byKind["ClusterRole"] {
		clusterRoles[r.GetName()] = true
	}
	g.Expect(clusterRoles).To(HaveKey("embedops-metrics-reader"))
	bindings := byKind["ClusterRoleBinding"]
	g.Expect(bindings).To(HaveLen(2))
	var bound []string
	for _, binding := range bindings {
		m := mapOf(t, binding)
		role := m["roleRef"].(map[string]any)["name"].(string)
		g.Expect(clusterRoles).To(HaveKey(role))
		bound = append(bound, role)
		g.Expect(m["subjects"]).To(ConsistOf(map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": "embedops-system"}))
	}
	g.Expect(bound).To(ConsistOf("embedops-manager-role", "embedops-metrics-auth-role"))

	leader := byKind["RoleBinding"]
	g.Expect(leader).To(HaveLen(1))
	g.Expect(mapOf(t, leader[0])).To(HaveKeyWithValue("roleRef", HaveKeyWithValue("name", byKind["Role"][0].GetName())))
	g.Expect(mapOf(t, leader[0])["subjects"]).To(ConsistOf(map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": "embedops-system"}))
	g.Expect(mapOf(t, byKind["Role"][0])["rules"]).To(ContainElements(
		HaveKeyWithValue("resources", ContainElement("leases")),
		HaveKeyWithValue("resources", ContainElement("events")),
	))
}

func TestDefaultDeploymentIsHardened(t *testing.T) {
	g := NewWithT(t)
	var deployments []*resource.Resource
	for _, r := range render(t, "default") {
		if r.GetKind() == "Deployment" {
			deployments = append(deployments, r)
		}
	}
	deployment := decode[appsv1.Deployment](t, deployments)
	pod := deployment.Spec.Template.Spec
	g.Expect(pod.SecurityContext).NotTo(BeNil())
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(pod.SecurityContext.SeccompProfile).To(HaveValue(HaveField("Type", corev1.SeccompProfileTypeRuntimeDefault)))
	g.Expect(pod.Containers).To(HaveLen(1))

	c := pod.Containers[0]
	g.Expect(c.Image).To(Equal("embedops-controller:latest"))
	g.Expect(c.SecurityContext).NotTo(BeNil())
	g.Expect(c.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(c.SecurityContext.Capabilities).To(HaveValue(HaveField("Drop", ConsistOf(corev1.Capability("ALL")))))
	g.Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty())
	g.Expect(c.SecurityContext.SeccompProfile).To(HaveValue(HaveField("Type", corev1.SeccompProfileTypeRuntimeDefault)))

	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		g.Expect(c.Resources.Requests).To(HaveKey(name))
		g.Expect(c.Resources.Limits).To(HaveKey(name))
	}

	g.Expect(c.Args).To(ContainElement("--enable-leader-election"))
	g.Expect(c.Args).To(ContainElement("--metrics-addr=:8443"))
	g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--metrics-secure")), "metrics stay on the secure default")
	g.Expect(c.Args).To(ContainElement("--health-addr=:9440"))
	g.Expect(c.Args).To(ContainElement("--populator-image=" + c.Image))
	flags := controllerFlags()
	for _, arg := range c.Args {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		g.Expect(flags.Lookup(name)).NotTo(BeNil(), "the controller has no flag %q", name)
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	g.Expect(ports).To(HaveKeyWithValue("https", int32(8443)))
	for _, probe := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
		g.Expect(probe.probe).NotTo(BeNil())
		g.Expect(probe.probe.HTTPGet).NotTo(BeNil())
		g.Expect(probe.probe.HTTPGet.Path).To(Equal(probe.path))
		g.Expect(ports).To(HaveKeyWithValue(probe.probe.HTTPGet.Port.String(), int32(9440)))
	}

	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	g.Expect(mounts).To(HaveKeyWithValue("tmp", "/tmp"), "a read-only root filesystem needs a writable /tmp")
}

// controllerFlags mirrors the flags cmd/controller/main.go binds, so the
// Deployment's arguments are checked against the real flag names.
func controllerFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.String("metrics-addr", ":8443", "")
	fs.Bool("metrics-secure", true, "")
	fs.String("metrics-cert-dir", "", "")
	fs.String("health-addr", ":9440", "")
	fs.Int("concurrent", 4, "")
	fs.Duration("progress-interval", 0, "")
	fs.String("endpoint-check", "", "")
	fs.Duration("endpoint-interval", 0, "")
	fs.String("populator-image", "", "")
	fs.String("leader-election-namespace", "", "")
	var le leaderelection.Options
	le.BindFlags(fs)
	var lo logger.Options
	lo.BindFlags(fs)
	var co runtimeclient.Options
	co.BindFlags(fs)
	return fs
}

// render runs kustomize on config/<dir> as `kustomize build` does.
func render(t *testing.T, dir string) []*resource.Resource {
	t.Helper()
	return renderRepo(t, filepath.Join("config", dir))
}

// decode converts the single resource in rs to T or fails the test.
func decode[T any](t *testing.T, rs []*resource.Resource) *T {
	t.Helper()
	if len(rs) != 1 {
		t.Fatalf("want one resource, got %d", len(rs))
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mapOf(t, rs[0]), &out); err != nil {
		t.Fatalf("decoding %s: %v", rs[0].GetName(), err)
	}
	return &out
}

// mapOf returns a resource as a map or fails the test.
func mapOf(t *testing.T, r *resource.Resource) map[string]any {
	t.Helper()
	m, err := r.Map()
	if err != nil {
		t.Fatalf("reading %s/%s: %v", r.GetKind(), r.GetName(), err)
	}
	return m
}
