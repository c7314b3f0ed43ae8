package upgrade

import (
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// TestKubectlApplyOfTheCRDsOverHelmsNeedsForceConflicts applies config/crd
// as docs/operations.md and the controller's refusal over older CRDs tell
// a user without the chart's crds.enabled to: over older CRDs a chart
// installed, a server-side apply without --force-conflicts is refused as a
// conflict with Helm's field manager and changes nothing; with it the CRDs
// become the working tree's, and no stored object is lost. The CRDs are
// crdsDirRelease's, older than the tree's (a lower schema version, the
// case the refusal names): server-side apply conflicts only where it
// changes a value another manager set, so over CRDs equal to the tree's
// (BASELINE's, while no schema change landed since) nothing is refused.
func TestKubectlApplyOfTheCRDsOverHelmsNeedsForceConflicts(t *testing.T) {
	g := NewWithT(t)
	h := installChart(t, openRelease(t, crdsDirRelease))
	for name, crd := range h.installed {
		version, err := strconv.Atoi(crd.Annotations[embedopsv1.SchemaVersionAnnotation])
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(version).To(BeNumerically("<", embedopsv1.SchemaVersion), "%s of %s is not older than the tree's", name, crdsDirRelease)
	}
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
