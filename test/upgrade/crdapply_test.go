package upgrade

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// TestKubectlApplyOfTheCRDsOverHelmsNeedsForceConflicts applies config/crd
// as docs/operations.md and the controller's refusal over older CRDs tell
// a user without the chart's crds.enabled to: over the CRDs the previous
// release's chart installed, a server-side apply without
// --force-conflicts is refused as a conflict with Helm's field manager and
// changes nothing; with it the CRDs become the working tree's, and no
// stored object is lost.
func TestKubectlApplyOfTheCRDsOverHelmsNeedsForceConflicts(t *testing.T) {
	g := NewWithT(t)
	h := installBaselineChart(t)
	render := func() []*unstructured.Unstructured {
		crds, err := harness.RenderOperator(filepath.Join(h.root, "config", "crd"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(crds).To(HaveLen(len(crdNames)))
		return crds
	}

	t.Log("kubectl apply --server-side -k config/crd: refused, nothing written")
	for _, crd := range render() {
		err := h.client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner(harness.OperatorFieldManager))
		g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "%s: want a conflict with Helm's fields, got %v", crd.GetName(), err)
	}
	expectUnchanged(t, g, h.client, h.installed)

	t.Log("kubectl apply --server-side --force-conflicts -k config/crd: the working tree's CRDs")
	for _, crd := range render() {
		g.Expect(h.client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(crd), client.ForceOwnership,
			client.FieldOwner(harness.OperatorFieldManager))).To(Succeed(), crd.GetName())
	}
	expectTreeCRDs(t, g, h.client, h.root)
	expectStored(t, g, h.client, h.stored)
}
