package health

import (
	"path"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// controllerImage is the image name config/manager uses.
const controllerImage = "embedops-controller"

// digest is a well-formed image digest.
var digest = "sha256:" + strings.Repeat("ab", 32)

func TestPopulatorImageFollowsTheImage(t *testing.T) {
	tests := []struct {
		name string
		// dir is rendered after edit, if set, changed the tree.
		dir   string
		edit  func(t *testing.T, fsys filesys.FileSystem)
		image string
	}{
		{name: "config/default as committed", dir: "/config/default", image: controllerImage + ":latest"},
		{
			// kustomize edit set image in config/manager, as its comment says.
			name: "image set in config/manager", dir: "/config/default",
			edit:  setImage("/config/manager", map[string]any{"newName": "team/embedops", "newTag": "v1.2.3"}),
			image: "team/embedops:v1.2.3",
		},
		{
			// Flux's spec.images and kustomize edit set image in the built path.
			name: "image set in config/default", dir: "/config/default",
			edit:  setImage("/config/default", map[string]any{"newName": "team/embedops", "digest": digest}),
			image: "team/embedops@" + digest,
		},
		{
			// Argo CD's kustomize.images on the operator Application.
			name: "image set in gitops/argocd/operator", dir: "/gitops/argocd/operator",
			edit:  setImage("/gitops/argocd/operator", map[string]any{"newTag": "v2"}),
			image: controllerImage + ":v2",
		},
		{
			name: "overlay with images and the transformer", dir: "/overlay",
			edit: func(t *testing.T, fsys filesys.FileSystem) {
				writeYAML(t, fsys, "/overlay/kustomization.yaml", map[string]any{
					"resources":    []any{"../config/default"},
					"images":       []any{map[string]any{"name": controllerImage, "newName": "team/embedops", "newTag": "v3"}},
					"transformers": []any{"../config/manager/populator-image"},
				})
			},
			image: "team/embedops:v3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			fsys := sourceTree(t, "")
			if tt.edit != nil {
				tt.edit(t, fsys)
			}
			var deployments []*resource.Resource
			for _, r := range renderFS(t, fsys, tt.dir) {
				if r.GetKind() == "Deployment" {
					deployments = append(deployments, r)
				}
			}
			c := decode[appsv1.Deployment](t, deployments).Spec.Template.Spec.Containers[0]
			g.Expect(c.Name).To(Equal("manager"))
			g.Expect(c.Image).To(Equal(tt.image))
			flags := controllerFlags()
			g.Expect(flags.Parse(c.Args)).To(Succeed())
			g.Expect(flags.GetString("populator-image")).To(Equal(c.Image))
			g.Expect(flags.Args()).To(BeEmpty())
		})
	}
}

// setImage returns an edit that sets controllerImage's entry in the
// images of dir's kustomization, as kustomize edit set image does.
func setImage(dir string, entry map[string]any) func(*testing.T, filesys.FileSystem) {
	return func(t *testing.T, fsys filesys.FileSystem) {
		t.Helper()
		file := path.Join(dir, "kustomization.yaml")
		data, err := fsys.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var k map[string]any
		if err := yaml.Unmarshal(data, &k); err != nil {
			t.Fatalf("decoding %s: %v", file, err)
		}
		images := []any{}
		if old, ok := k["images"].([]any); ok {
			for _, i := range old {
				if m, _ := i.(map[string]any); m["name"] != controllerImage {
					images = append(images, i)
				}
			}
		}
		entry["name"] = controllerImage
		k["images"] = append(images, entry)
		writeYAML(t, fsys, file, k)
	}
}

// writeYAML encodes v into a file of fsys or fails the test.
func writeYAML(t *testing.T, fsys filesys.FileSystem, file string, v any) {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err == nil {
		err = fsys.WriteFile(file, data)
	}
	if err != nil {
		t.Fatalf("writing %s: %v", file, err)
	}
}
