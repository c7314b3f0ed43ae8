package builder_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

func TestPodTemplatePatchIsApplied(t *testing.T) {
	cases := []struct {
		name   string
		patch  string
		expect func(g *WithT, template corev1.PodTemplateSpec)
	}{
		{
			name:  "tolerations and node selector are added",
			patch: `{"spec":{"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}],"nodeSelector":{"gpu":"a100"}}}`,
			expect: func(g *WithT, template corev1.PodTemplateSpec) {
				g.Expect(template.Spec.Tolerations).To(ConsistOf(corev1.Toleration{
					Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
				}))
				g.Expect(template.Spec.NodeSelector).To(Equal(map[string]string{"gpu": "a100"}))
			},
		},
		{
			name:  "annotations and labels are merged with the generated ones",
			patch: `{"metadata":{"annotations":{"prometheus.io/scrape":"true"},"labels":{"team":"search"}}}`,
			expect: func(g *WithT, template corev1.PodTemplateSpec) {
				g.Expect(template.Annotations).To(HaveKeyWithValue("prometheus.io/scrape", "true"))
				g.Expect(template.Annotations).To(HaveKeyWithValue("kubectl.kubernetes.io/default-container", "embedding"))
				g.Expect(template.Labels).To(HaveKeyWithValue("team", "search"))
				g.Expect(template.Labels).To(HaveKeyWithValue(embedopsv1.NameLabel, "s"))
			},
		},
		{
			name:  "the embedding container's env is merged by name",
			patch: `{"spec":{"containers":[{"name":"embedding","env":[{"name":"RUST_LOG","value":"debug"},{"name":"MODE","value":"patched"}]}]}}`,
			expect: func(g *WithT, template corev1.PodTemplateSpec) {
				c := embeddingContainer(template)
				g.Expect(c.Env).To(ContainElements(
					corev1.EnvVar{Name: "HUGGINGFACE_HUB_CACHE", Value: "/data"},
					corev1.EnvVar{Name: "RUST_LOG", Value: "debug"},
					corev1.EnvVar{Name: "MODE", Value: "patched"},
				))
				g.Expect(c.Env).To(HaveLen(3), "MODE from spec.env is replaced, not repeated")
				g.Expect(c.Args).To(HaveLen(5))
				g.Expect(c.Image).To(Equal(embedopsv1.DefaultImage))
			},
		},
		{
			name:  "a sidecar is added beside the embedding container",
			patch: `{"spec":{"containers":[{"name":"proxy","image":"envoy:v1"}]}}`,
			expect: func(g *WithT, template corev1.PodTemplateSpec) {
				g.Expect(template.Spec.Containers).To(HaveLen(2))
				g.Expect(embeddingContainer(template).Args).To(HaveLen(5))
			},
		},
		{
			name:  "resources and security context of the container can be tuned",
			patch: `{"spec":{"containers":[{"name":"embedding","resources":{"limits":{"memory":"4Gi"}},"securityContext":{"readOnlyRootFilesystem":true}}]}}`,
			expect: func(g *WithT, template corev1.PodTemplateSpec) {
				c := embeddingContainer(template)
				g.Expect(c.Resources.Limits.Memory().String()).To(Equal("4Gi"))
				g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
				g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), "fields the patch does not name are kept")
			},
		},
		{
			name:  "extra volumes and mounts are added",
			patch: `{"spec":{"volumes":[{"name":"shm","emptyDir":{"medium":"Memory"}}],"containers":[{"name":"embedding","volumeMounts":[{"name":"shm","mountPath":"/dev/shm"}]}]}}`,
			expect: func(g *WithT, template corev1.PodTemplateSpec) {
				g.Expect(template.Spec.Volumes).To(HaveLen(2))
				g.Expect(embeddingContainer(template).VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "shm", MountPath: "/dev/shm"}))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := server("s", fixtures.WithEnv(corev1.EnvVar{Name: "MODE", Value: "spec"}), fixtures.WithPodTemplate(tc.patch))
			sts, err := builder.StatefulSet(s, nil, builder.Facts{})
			g.Expect(err).NotTo(HaveOccurred())
			tc.expect(g, sts.Spec.Template)
		})
	}
}

func TestEmptyPodTemplatePatchChangesNothing(t *testing.T) {
	cases := []struct{ name, patch string }{
		{"empty object", "{}"},
		{"null", "null"},
		{"no bytes", ""},
		{"empty metadata and spec", ` {"metadata":{},"spec":{}} `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cache := perReplicaCache("cache-1", "", "10Gi")
			options := []fixtures.Option{fixtures.WithToken("hf", "token"), fixtures.WithEnv(corev1.EnvVar{Name: "A", Value: "b"})}
			patched := server("s", append(options, fixtures.WithPodTemplate(tc.patch))...)
			g.Expect(render(g, patched, cache)).To(Equal(render(g, server("s", options...), cache)))
		})
	}
}

func TestPodTemplatePatchIsRefused(t *testing.T) {
	cases := []struct {
		name    string
		patch   string
		cache   *builder.Cache
		message string
	}{
		{"not JSON", `{"spec":`, nil, "not a JSON object: unexpected end of JSON input"},
		{"not an object", `["spec"]`, nil, "not a JSON object: json: cannot unmarshal array"},
		{"a field of the wrong type", `{"spec":{"tolerations":"all"}}`, nil, "cannot unmarshal"},
		{"a list given as an object", `{"spec":{"containers":{"name":"embedding"}}}`, nil, "invalid spec.podTemplate"},
		{"an unknown field", `{"spec":{"tolerashuns":[]}}`, nil, `unknown field "tolerashuns"`},
		{"a container without a name", `{"spec":{"containers":[{"image":"x"}]}}`, nil, "invalid spec.podTemplate"},
		{"the container is renamed", `{"spec":{"$setElementOrder/containers":[{"name":"tei"}],"containers":[{"name":"embedding","$patch":"delete"},{"name":"tei","image":"x"}]}}`, nil, `container "embedding" must be kept`},
		{"the container list is replaced", `{"spec":{"containers":[{"$patch":"replace"},{"name":"tei","image":"x"}]}}`, nil, `container "embedding" must be kept`},
		{"the pod spec is replaced", `{"spec":{"$patch":"replace","containers":[{"name":"tei","image":"x"}]}}`, nil, `container "embedding" must be kept`},
		{"the instance label is changed", `{"metadata":{"labels":{"app.kubernetes.io/instance":"other"}}}`, nil, "the selector and owner labels must keep their values: app.kubernetes.io/instance=s"},
		{"an owner label is removed", `{"metadata":{"labels":{"embedops.dev/name":null}}}`, nil, "must keep their values: embedops.dev/name=s"},
		{"the labels are removed", `{"metadata":{"labels":null}}`, nil, "must keep their values: app.kubernetes.io/instance=s, app.kubernetes.io/managed-by=embedops, app.kubernetes.io/name=text-embeddings-inference, embedops.dev/name=s, embedops.dev/namespace=models"},
		{"the args are replaced", `{"spec":{"containers":[{"name":"embedding","args":["--model-id=other"]}]}}`, nil, "may not change args --model-id, --revision, --port, --hostname"},
		{"the port is changed in args", `{"spec":{"containers":[{"name":"embedding","args":["--model-id=BAAI/bge-small-en-v1.5","--revision=main","--port","9000","--hostname=0.0.0.0"]}]}}`, nil, "may not change args --port:"},
		{"the cache location is changed", `{"spec":{"containers":[{"name":"embedding","env":[{"name":"HUGGINGFACE_HUB_CACHE","value":"/tmp"}]}]}}`, nil, "may not change env HUGGINGFACE_HUB_CACHE:"},
		{"another cache location is set", `{"spec":{"containers":[{"name":"embedding","env":[{"name":"HF_HOME","value":"/tmp"}]}]}}`, nil, "may not change env HF_HOME:"},
		{"the token is set", `{"spec":{"containers":[{"name":"embedding","env":[{"name":"HF_TOKEN","value":"hf_secret"}]}]}}`, nil, "may not change env HF_TOKEN:"},
		{"the cache mount is moved", `{"spec":{"containers":[{"name":"embedding","volumeMounts":[{"name":"cache","mountPath":"/data","$patch":"delete"}]}]}}`, nil, "the mount at /data is managed"},
		{"the cache mount is renamed", `{"spec":{"containers":[{"name":"embedding","volumeMounts":[{"name":"other","mountPath":"/data"}]}]}}`, nil, "the mount at /data is managed"},
		{"the shared claim is swapped", `{"spec":{"volumes":[{"name":"cache","persistentVolumeClaim":{"claimName":"mine"}}]}}`, sharedCache("claim", "10Gi"), `volume "cache" is managed`},
		{"the claim template is shadowed", `{"spec":{"volumes":[{"name":"cache-1","emptyDir":{}}]}}`, perReplicaCache("cache-1", "", "10Gi"), `volume "cache-1" is managed`},
		{"the populate init container is removed", `{"spec":{"initContainers":[{"name":"populate","$patch":"delete"}]}}`, withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), `init container "populate" is managed`},
		{"the populator image is swapped", `{"spec":{"initContainers":[{"name":"populate","image":"mine:1"}]}}`, withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), `init container "populate": the patch may change its resources and env only`},
		{"the populator is given args", `{"spec":{"initContainers":[{"name":"populate","args":["--revision","other"]}]}}`, withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), `init container "populate": the patch may change its resources and env only`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(server("s", fixtures.WithPodTemplate(tc.patch)), tc.cache, builder.Facts{})
			g.Expect(err).To(MatchError(builder.ErrInvalidPodTemplate))
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			g.Expect(sts).To(BeNil(), "an invalid patch never falls back to the generated pod")
			t.Log(err)
		})
	}
}

func TestPodTemplatePatchMayNotReachTheHostOrRaisePrivileges(t *testing.T) {
	populating := func() *builder.Cache { return withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1") }
	cases := []struct {
		name    string
		patch   string
		cache   *builder.Cache
		message string
	}{
		{"host network", `{"spec":{"hostNetwork":true}}`, nil, "the pod may not use the host: hostNetwork"},
		{"host PID and IPC", `{"spec":{"hostPID":true,"hostIPC":true}}`, nil, "the pod may not use the host: hostPID, hostIPC"},
		{"a hostPath volume", `{"spec":{"volumes":[{"name":"root","hostPath":{"path":"/"}}],"containers":[{"name":"embedding","volumeMounts":[{"name":"root","mountPath":"/host"}]}]}}`, nil, `the pod may not use the host: hostPath volume "root"`},
		{"a host port", `{"spec":{"containers":[{"name":"embedding","ports":[{"name":"http","containerPort":8080,"hostPort":80}]}]}}`, nil, `container "embedding" hostPort 80`},
		{"a Windows host process", `{"spec":{"securityContext":{"windowsOptions":{"hostProcess":true}}}}`, nil, "the pod may not use the host: hostProcess"},
		{"a privileged container", `{"spec":{"containers":[{"name":"embedding","securityContext":{"privileged":true}}]}}`, nil, `container "embedding" may not run with privileged`},
		{"a privileged sidecar", `{"spec":{"containers":[{"name":"proxy","image":"envoy:v1","securityContext":{"privileged":true}}]}}`, nil, `container "proxy" may not run with privileged`},
		{"privilege escalation", `{"spec":{"containers":[{"name":"embedding","securityContext":{"allowPrivilegeEscalation":true}}]}}`, nil, `container "embedding" may not run with allowPrivilegeEscalation`},
		{"escalation no longer forbidden", `{"spec":{"containers":[{"name":"embedding","securityContext":{"allowPrivilegeEscalation":null}}]}}`, nil, `container "embedding": the patch may not remove allowPrivilegeEscalation false`},
		{"an added capability", `{"spec":{"containers":[{"name":"embedding","securityContext":{"capabilities":{"add":["SYS_ADMIN","NET_BIND_SERVICE"]}}}]}}`, nil, `container "embedding" may not run with capability SYS_ADMIN`},
		{"capabilities no longer dropped", `{"spec":{"containers":[{"name":"embedding","securityContext":{"capabilities":{"drop":null}}}]}}`, nil, "the drop of ALL capabilities"},
		{"an unconfined seccomp profile", `{"spec":{"securityContext":{"seccompProfile":{"type":"Unconfined"}}}}`, nil, "the pod may not run with seccomp profile Unconfined"},
		{"no seccomp profile", `{"spec":{"securityContext":{"seccompProfile":null}}}`, nil, "the pod must keep a RuntimeDefault or Localhost seccomp profile"},
		{"an unconfined AppArmor profile", `{"spec":{"containers":[{"name":"embedding","securityContext":{"appArmorProfile":{"type":"Unconfined"}}}]}}`, nil, `container "embedding" may not run with AppArmor profile Unconfined`},
		{"an unmasked /proc", `{"spec":{"containers":[{"name":"embedding","securityContext":{"procMount":"Unmasked"}}]}}`, nil, `container "embedding" may not run with procMount Unmasked`},
		{"the pod as root", `{"spec":{"securityContext":{"runAsUser":0}}}`, nil, "the pod may not run as root: runAsUser 0"},
		{"a container as root", `{"spec":{"containers":[{"name":"embedding","securityContext":{"runAsUser":0,"runAsNonRoot":false}}]}}`, nil, `container "embedding" may not run as root: runAsUser 0, runAsNonRoot false`},
		{"the pod may run as root", `{"spec":{"securityContext":{"runAsNonRoot":false}}}`, nil, "the pod may not run as root: runAsNonRoot false"},
		{"a sidecar without runAsNonRoot", `{"spec":{"securityContext":{"runAsNonRoot":null},"containers":[{"name":"proxy","image":"envoy:v1"}]}}`, nil, `container "proxy" may not run as root: runAsNonRoot unset`},
		{"a privileged init container", `{"spec":{"initContainers":[{"name":"setup","image":"busybox","securityContext":{"privileged":true}}]}}`, nil, `init container "setup" may not run with privileged`},
		{"the populator as root", `{"spec":{"initContainers":[{"name":"populate","securityContext":{"runAsUser":0}}]}}`, populating(), `init container "populate" may not run as root: runAsUser 0`},
		{"the populator may escalate", `{"spec":{"initContainers":[{"name":"populate","securityContext":{"allowPrivilegeEscalation":true}}]}}`, populating(), `init container "populate": the patch may not remove allowPrivilegeEscalation false`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts, err := builder.StatefulSet(server("s", fixtures.WithPodTemplate(tc.patch)), tc.cache, builder.Facts{})
			g.Expect(err).To(MatchError(builder.ErrInvalidPodTemplate))
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			g.Expect(sts).To(BeNil(), "a refused patch is never stripped and applied")
		})
	}
}

func TestPodTemplatePatchMayTightenSecurity(t *testing.T) {
	cases := []struct{ name, patch string }{
		{"a read-only root filesystem", `{"spec":{"containers":[{"name":"embedding","securityContext":{"readOnlyRootFilesystem":true}}]}}`},
		{"another non-root user", `{"spec":{"securityContext":{"runAsUser":2000,"runAsGroup":2000,"fsGroup":2000}}}`},
		{"a Localhost seccomp profile", `{"spec":{"securityContext":{"seccompProfile":{"type":"Localhost","localhostProfile":"tei.json"}}}}`},
		{"a sidecar inheriting the pod's context", `{"spec":{"containers":[{"name":"proxy","image":"envoy:v1"}]}}`},
		{"a sidecar binding a low port", `{"spec":{"containers":[{"name":"proxy","image":"envoy:v1","ports":[{"containerPort":443}],"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"],"add":["NET_BIND_SERVICE"]}}}]}}`},
		{"host namespaces turned off", `{"spec":{"hostNetwork":false,"hostPID":false,"hostIPC":false}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := builder.StatefulSet(server("s", fixtures.WithPodTemplate(tc.patch)), withPopulator(perReplicaCache("cache-1", "", "10Gi"), "p:1"), builder.Facts{})
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
		})
	}
}
