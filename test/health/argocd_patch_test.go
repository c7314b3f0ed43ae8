package health

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// usersArgoCDCM is an argocd-cm with settings of its user's own, among them
// a health check of another kind.
const usersArgoCDCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
data:
  url: https://argocd.example.com
  timeout.reconciliation: 120s
  resource.customizations.health.example.com_Widget: |
    return {status = "Healthy"}
`

// usersRBACCM is another Argo CD ConfigMap, which the patch leaves alone.
const usersRBACCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-rbac-cm
data:
  policy.default: role:readonly
`

// usersKeys are the data usersArgoCDCM holds.
var usersKeys = map[string]string{
	"url":                    "https://argocd.example.com",
	"timeout.reconciliation": "120s",
	"resource.customizations.health.example.com_Widget": "return {status = \"Healthy\"}\n",
}

func TestArgoCDComponentAddsTheHealthCheckAndKeepsTheUsersArgoCDCM(t *testing.T) {
	// The user's kustomization is at /argocd, beside embedops' tree at
	// /embedops, as a checkout or a remote component would be.
	const component = "../embedops/config/argocd"
	script := readFile(t, filepath.Join(customizationsDir, "embedops.dev/EmbeddingServer", "health.lua"))
	cases := []struct {
		name, kustomization, cm string
	}{
		{
			name:          "namespaced by the user's kustomization",
			kustomization: "namespace: argocd\nresources:\n- argocd-cm.yaml\n- argocd-rbac-cm.yaml\ncomponents:\n- " + component + "\n",
			cm:            usersArgoCDCM,
		},
		{
			name:          "namespaced in the user's manifest",
			kustomization: "resources:\n- argocd-cm.yaml\n- argocd-rbac-cm.yaml\ncomponents:\n- " + component + "\n",
			cm:            usersArgoCDCM[:len("apiVersion: v1\nkind: ConfigMap\nmetadata:\n")] + "  namespace: argocd\n" + usersArgoCDCM[len("apiVersion: v1\nkind: ConfigMap\nmetadata:\n"):],
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fsys := filesys.MakeFsInMemory()
			files, err := filepath.Glob(filepath.Join(configDir, "argocd", "*.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(files).To(HaveLen(2), "the component's files")
			for _, file := range files {
				g.Expect(fsys.WriteFile(filepath.Join("/embedops/config/argocd", filepath.Base(file)), []byte(readFile(t, file)))).To(Succeed())
			}
			for name, content := range map[string]string{
				"kustomization.yaml":  "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" + tc.kustomization,
				"argocd-cm.yaml":      tc.cm,
				"argocd-rbac-cm.yaml": usersRBACCM,
			} {
				g.Expect(fsys.WriteFile(filepath.Join("/argocd", name), []byte(content))).To(Succeed())
			}
			byName := map[string]corev1.ConfigMap{}
			for _, r := range renderFS(t, fsys, "/argocd") {
				byName[r.GetName()] = as[corev1.ConfigMap](t, r)
			}
			g.Expect(byName).To(HaveLen(2), "the component adds no object")
			cm := byName["argocd-cm"]
			g.Expect(cm.Namespace).To(Equal("argocd"))
			g.Expect(cm.Labels).To(Equal(map[string]string{"app.kubernetes.io/name": "argocd-cm", "app.kubernetes.io/part-of": "argocd"}))
			for key, value := range usersKeys {
				g.Expect(cm.Data).To(HaveKeyWithValue(key, value))
			}
			g.Expect(cm.Data).To(HaveKeyWithValue(healthKey("embedops.dev/EmbeddingServer"), script))
			g.Expect(cm.Data).To(HaveLen(len(usersKeys) + len(healthKinds)))
			g.Expect(byName["argocd-rbac-cm"].Data).To(Equal(map[string]string{"policy.default": "role:readonly"}))
		})
	}
}

// TestArgoCDPatchMergedIntoARunningArgoCDKeepsItsKeys merges argocd-cm.yaml
// as `kubectl patch configmap argocd-cm --patch-file` does.
func TestArgoCDPatchMergedIntoARunningArgoCDKeepsItsKeys(t *testing.T) {
	g := NewWithT(t)
	running, err := yaml.YAMLToJSON([]byte(usersArgoCDCM))
	g.Expect(err).NotTo(HaveOccurred())
	patch, err := yaml.YAMLToJSON([]byte(readFile(t, argocdCMPath)))
	g.Expect(err).NotTo(HaveOccurred())
	merged, err := strategicpatch.StrategicMergePatch(running, patch, corev1.ConfigMap{})
	g.Expect(err).NotTo(HaveOccurred())
	var cm corev1.ConfigMap
	g.Expect(yaml.Unmarshal(merged, &cm)).To(Succeed())
	for key, value := range usersKeys {
		g.Expect(cm.Data).To(HaveKeyWithValue(key, value))
	}
	g.Expect(cm.Data).To(HaveKey(healthKey("embedops.dev/EmbeddingServer")))
	g.Expect(cm.Labels).To(HaveKeyWithValue("app.kubernetes.io/part-of", "argocd"))
}
