//go:build linux

package node

import (
	"encoding/json"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// advertised guards advertiseGPUs: the node advertises GPUs once.
var advertised sync.Mutex

// advertiseGPUs makes the node offer at least n GPUs (gpuResource) by
// patching its status, as the Kubernetes task "Advertise Extended
// Resources for a Node" does; the kubelet keeps capacity it does not
// manage, and only a device plugin would hand out devices.
func advertiseGPUs(t *testing.T, n resource.Quantity) {
	t.Helper()
	advertised.Lock()
	defer advertised.Unlock()
	g := NewWithT(t)
	current, err := node.Clientset.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	if have, ok := current.Status.Allocatable[gpuResource]; ok && have.Cmp(n) >= 0 {
		return
	}
	quantity := n.String()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"capacity":    map[string]string{string(gpuResource): quantity},
		"allocatable": map[string]string{string(gpuResource): quantity},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = node.Clientset.CoreV1().Nodes().Patch(t.Context(), node.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("the node advertises %s %s", quantity, gpuResource)
}

// nodeAllocatableCPU is the CPU the node offers pods.
func nodeAllocatableCPU(t *testing.T) resource.Quantity {
	t.Helper()
	current, err := node.Clientset.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return current.Status.Allocatable[corev1.ResourceCPU]
}
