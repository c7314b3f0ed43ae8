package chart

import (
	"encoding/json"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// configArgs are config/manager's arguments, which the chart's defaults
// reproduce.
var configArgs = []string{
	"--populator-image=embedops-controller:latest",
	"--enable-leader-election",
	"--metrics-addr=:8443",
	"--health-addr=:9440",
	"--log-encoding=json",
	"--log-level=info",
}

// TestValuesLand renders non-default values and finds each where it
// belongs.
func TestValuesLand(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		check  func(g Gomega, r rendered)
	}{{
		name:   "the image, which the populator follows",
		values: map[string]any{"image": map[string]any{"repository": "registry.example.com/embedops", "tag": "v1.2.3", "pullPolicy": "Always"}},
		check: func(g Gomega, r rendered) {
			c := r.manager(g)
			g.Expect(c.Image).To(Equal("registry.example.com/embedops:v1.2.3"))
			g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullAlways))
			g.Expect(c.Args[0]).To(Equal("--populator-image=registry.example.com/embedops:v1.2.3"))
		},
	}, {
		name:   "a populator image of its own",
		values: map[string]any{"populator": map[string]any{"image": "registry.example.com/populator:v1"}},
		check: func(g Gomega, r rendered) {
			g.Expect(r.manager(g).Args[0]).To(Equal("--populator-image=registry.example.com/populator:v1"))
		},
	}, {
		name:   "no populator",
		values: map[string]any{"populator": map[string]any{"enabled": false}},
		check: func(g Gomega, r rendered) {
			g.Expect(r.manager(g).Args).To(Equal(configArgs[1:]))
		},
	}, {
		name:   "no leader election: no flag, no Role",
		values: map[string]any{"leaderElection": map[string]any{"enabled": false}},
		check: func(g Gomega, r rendered) {
			g.Expect(r.manager(g).Args).NotTo(ContainElement("--enable-leader-election"))
			g.Expect(r.kinds()).NotTo(ContainElements("Role", "RoleBinding"))
		},
	}, {
		name:   "a watch label selector (Flux's sharding)",
		values: map[string]any{"watchLabelSelector": "sharding.fluxcd.io/key=shard1"},
		check: func(g Gomega, r rendered) {
			g.Expect(r.manager(g).Args).To(Equal(append(slices.Clone(configArgs), "--watch-label-selector=sharding.fluxcd.io/key=shard1")))
		},
	}, {
		name:   "shards: a Deployment per shard, the main one takes the servers no shard claims",
		values: map[string]any{"shards": []any{"shard1", "shard2"}},
		check: func(g Gomega, r rendered) {
			g.Expect(r.names("Deployment")).To(ConsistOf("embedops-controller", "embedops-controller-shard1", "embedops-controller-shard2"))
			main := r.deploymentNamed(g, "embedops-controller")
			g.Expect(main.Spec.Template.Spec.Containers[0].Args).To(Equal(append(slices.Clone(configArgs), "--watch-label-selector=!sharding.fluxcd.io/key")))
			g.Expect(main.Spec.Selector.MatchLabels).To(HaveKeyWithValue("app.kubernetes.io/component", "controller"))
			for _, shard := range []string{"shard1", "shard2"} {
				d := r.deploymentNamed(g, "embedops-controller-"+shard)
				component := "controller-" + shard
				g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "embedops", "app.kubernetes.io/component": component}),
					"a shard's selector does not overlap the main one's")
				g.Expect(d.Spec.Template.Labels).To(Equal(d.Spec.Selector.MatchLabels))
				g.Expect(d.Labels).To(HaveKeyWithValue("app.kubernetes.io/component", component))
				g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(Equal(append(slices.Clone(configArgs),
					"--watch-label-selector=sharding.fluxcd.io/key="+shard,
					"--endpoint-check-pod-labels=app.kubernetes.io/name=embedops,app.kubernetes.io/component="+component)))
				// Everything else is the main controller's.
				d.Name, d.Labels, d.Spec.Selector, d.Spec.Template.Labels, d.Spec.Template.Spec.Containers[0].Args = main.Name, main.Labels,
					main.Spec.Selector, main.Spec.Template.Labels, main.Spec.Template.Spec.Containers[0].Args
				g.Expect(d).To(Equal(main))
			}
		},
	}, {
		name:   "shards with a watch label selector of the main controller's own",
		values: map[string]any{"shards": []any{"shard1"}, "watchLabelSelector": "!sharding.fluxcd.io/key,team=search"},
		check: func(g Gomega, r rendered) {
			g.Expect(r.deploymentNamed(g, "embedops-controller").Spec.Template.Spec.Containers[0].Args).To(
				ContainElement("--watch-label-selector=!sharding.fluxcd.io/key,team=search"))
		},
	}, {
		name:   "replicas",
		values: map[string]any{"replicaCount": 3},
		check: func(g Gomega, r rendered) {
			g.Expect(r.deployment(g).Spec.Replicas).To(HaveValue(Equal(int32(3))))
		},
	}, {
		name:   "no metrics: no endpoint, Service, port or metrics roles",
		values: map[string]any{"metrics": map[string]any{"enabled": false}},
		check: func(g Gomega, r rendered) {
			c := r.manager(g)
			g.Expect(c.Args).To(ContainElement("--metrics-addr=0"))
			g.Expect(c.Ports).To(ConsistOf(HaveField("Name", "healthz")))
			g.Expect(r.kinds()).NotTo(ContainElement("Service"))
			g.Expect(r.names("ClusterRole")).To(ConsistOf("embedops-manager-role"))
			g.Expect(r.names("ClusterRoleBinding")).To(ConsistOf("embedops-manager-rolebinding"))
		},
	}, {
		name:   "ports",
		values: map[string]any{"metrics": map[string]any{"port": 9443}, "health": map[string]any{"port": 8081}},
		check: func(g Gomega, r rendered) {
			c := r.manager(g)
			g.Expect(c.Args).To(ContainElements("--metrics-addr=:9443", "--health-addr=:8081"))
			g.Expect(c.Ports).To(ConsistOf(
				SatisfyAll(HaveField("Name", "https"), HaveField("ContainerPort", int32(9443))),
				SatisfyAll(HaveField("Name", "healthz"), HaveField("ContainerPort", int32(8081))),
			))
			g.Expect(r.object(g, "Service")).To(HaveKeyWithValue("spec", HaveKeyWithValue("ports",
				ConsistOf(HaveKeyWithValue("port", BeNumerically("==", 9443))))))
		},
	}, {
		name:   "logging",
		values: map[string]any{"log": map[string]any{"level": "debug", "encoding": "console"}},
		check: func(g Gomega, r rendered) {
			g.Expect(r.manager(g).Args).To(ContainElements("--log-level=debug", "--log-encoding=console"))
		},
	}, {
		name:   "extra flags, after config/manager's",
		values: map[string]any{"extraArgs": []any{"--concurrent=8", "--argocd-namespace=gitops"}},
		check: func(g Gomega, r rendered) {
			g.Expect(r.manager(g).Args).To(Equal(append(configArgs[:len(configArgs):len(configArgs)], "--concurrent=8", "--argocd-namespace=gitops")))
		},
	}, {
		name: "resources and placement",
		values: map[string]any{
			"resources":        map[string]any{"requests": map[string]any{"cpu": "250m"}},
			"nodeSelector":     map[string]any{"node-role.example.com/system": "true"},
			"tolerations":      []any{map[string]any{"key": "system", "operator": "Exists", "effect": "NoSchedule"}},
			"affinity":         map[string]any{"nodeAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"weight": 1, "preference": map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a"}}}}}}}},
			"imagePullSecrets": []any{map[string]any{"name": "registry"}},
		},
		check: func(g Gomega, r rendered) {
			pod := r.deployment(g).Spec.Template.Spec
			// Helm merges maps with the defaults: the limits stay.
			g.Expect(pod.Containers[0].Resources.Requests).To(Equal(corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
			}))
			g.Expect(pod.Containers[0].Resources.Limits).To(HaveKey(corev1.ResourceMemory))
			g.Expect(pod.NodeSelector).To(Equal(map[string]string{"node-role.example.com/system": "true"}))
			g.Expect(pod.Tolerations).To(ConsistOf(corev1.Toleration{Key: "system", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))
			g.Expect(pod.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
			g.Expect(pod.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "registry"}))
		},
	}, {
		name: "the Prometheus objects' labels",
		values: map[string]any{"prometheus": map[string]any{
			"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "monitoring"}},
			"rule":           map[string]any{"enabled": true, "labels": map[string]any{"release": "monitoring"}},
			"teiPodMonitor":  map[string]any{"enabled": true, "labels": map[string]any{"release": "monitoring"}},
		}},
		check: func(g Gomega, r rendered) {
			for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "PodMonitor"} {
				g.Expect(r.object(g, kind)).To(HaveKeyWithValue("metadata", HaveKeyWithValue("labels", SatisfyAll(
					HaveKeyWithValue("release", "monitoring"), HaveKeyWithValue("app.kubernetes.io/part-of", "embedops")))), kind)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(NewWithT(t), rendered(render(t, tt.values)))
		})
	}
}

// TestReleaseNamespace: every namespaced object, and every reference to
// the ServiceAccount, is in the release's namespace.
func TestReleaseNamespace(t *testing.T) {
	g := NewWithT(t)
	c, err := Load(diskFS(), chartDir())
	g.Expect(err).NotTo(HaveOccurred())
	objects, err := Render(c, Release{Name: "ops", Namespace: "platform", Values: everythingOn()})
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objects {
		meta := o["metadata"].(map[string]any)
		switch o.Kind() {
		case "Namespace":
			g.Expect(meta["name"]).To(Equal("platform"))
		case "CustomResourceDefinition", "ClusterRole", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			g.Expect(meta).NotTo(HaveKey("namespace"), o.Key())
		case "ClusterRoleBinding", "RoleBinding":
			g.Expect(o["subjects"]).To(ConsistOf(HaveKeyWithValue("namespace", "platform")), o.Key())
			g.Expect(meta["namespace"]).To(Or(BeNil(), Equal("platform")), o.Key())
		default:
			g.Expect(meta["namespace"]).To(Equal("platform"), o.Key())
		}
	}
}

// rendered is a chart rendering.
type rendered []Object

// kinds lists the rendered kinds.
func (r rendered) kinds() []string {
	out := make([]string, 0, len(r))
	for _, o := range r {
		out = append(out, o.Kind())
	}
	return out
}

// names lists the names of the objects of kind.
func (r rendered) names(kind string) []string {
	var out []string
	for _, o := range r {
		if o.Kind() == kind {
			out = append(out, o.Name())
		}
	}
	return out
}

// object is the one object of kind.
func (r rendered) object(g Gomega, kind string) Object {
	var found []Object
	for _, o := range r {
		if o.Kind() == kind {
			found = append(found, o)
		}
	}
	g.ExpectWithOffset(1, found).To(HaveLen(1), kind)
	return found[0]
}

// deployment is the controller Deployment.
func (r rendered) deployment(g Gomega) *appsv1.Deployment {
	return asDeployment(g, r.object(g, "Deployment"))
}

// deploymentNamed is the Deployment named name.
func (r rendered) deploymentNamed(g Gomega, name string) *appsv1.Deployment {
	for _, o := range r {
		if o.Kind() == "Deployment" && o.Name() == name {
			return asDeployment(g, o)
		}
	}
	g.Expect(r.names("Deployment")).To(ContainElement(name))
	return nil
}

// asDeployment decodes a rendered Deployment.
func asDeployment(g Gomega, o Object) *appsv1.Deployment {
	data, err := json.Marshal(o)
	g.Expect(err).NotTo(HaveOccurred())
	var d appsv1.Deployment
	g.Expect(json.Unmarshal(data, &d)).To(Succeed())
	return &d
}

// manager is the controller container.
func (r rendered) manager(g Gomega) corev1.Container {
	containers := r.deployment(g).Spec.Template.Spec.Containers
	g.Expect(containers).To(ConsistOf(HaveField("Name", "manager")))
	return containers[0]
}
