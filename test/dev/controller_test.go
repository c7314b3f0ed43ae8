package main

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/embedops/embedops/test/harness"
)

// TestOperatorOverlayAddsTheProgressInterval renders the overlay make dev
// installs: config/default's controller with its own arguments, the dev
// image and progressIntervalArg last.
func TestOperatorOverlayAddsTheProgressInterval(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(harness.WriteOperatorOverlay(dir, controllerImageName, controllerTag)).To(Succeed())
	g.Expect(addProgressInterval(filepath.Join(dir, "kustomization.yaml"))).To(Succeed())
	objects, err := harness.RenderOperator(dir)
	g.Expect(err).NotTo(HaveOccurred())
	var deployment *unstructured.Unstructured
	for _, obj := range objects {
		if obj.GetKind() == "Deployment" && obj.GetName() == harness.OperatorDeployment {
			deployment = obj
		}
	}
	g.Expect(deployment).NotTo(BeNil())
	containers, _, err := unstructured.NestedFieldNoCopy(deployment.Object, "spec", "template", "spec", "containers")
	g.Expect(err).NotTo(HaveOccurred())
	manager := containers.([]any)[0].(map[string]any)
	g.Expect(manager["image"]).To(Equal(controllerImageName + ":" + controllerTag))
	args := manager["args"].([]any)
	g.Expect(args).To(ContainElement("--enable-leader-election"), "config/default's own arguments stay")
	g.Expect(args[len(args)-1]).To(Equal(progressIntervalArg))
}
