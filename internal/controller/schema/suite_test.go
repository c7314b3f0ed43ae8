package schema

import (
	"context"
	"os"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// env is an envtest control plane with the CRDs of config/crd, as make
// manifests generates them.
var env *harness.Env

func TestMain(m *testing.M) {
	os.Exit(harness.RunWithEnv(m, &env, harness.EnvOptions{}))
}

// The generated CRDs carry this package's schema version, and a CRD whose
// annotation says an older one stops the controller before it writes.
func TestTheInstalledCRDsCarryTheControllersSchemaVersion(t *testing.T) {
	g := NewWithT(t)
	g.Expect(CheckConfig(t.Context(), env.Config)).To(Succeed())

	reader, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apiextensionsv1.AddToScheme(reader.Scheme())).To(Succeed())
	for _, name := range CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(reader.Get(t.Context(), client.ObjectKey{Name: name}, crd)).To(Succeed())
		g.Expect(crd.Annotations).To(HaveKeyWithValue(embedopsv1.SchemaVersionAnnotation, strconv.Itoa(embedopsv1.SchemaVersion)), "CRD %s", name)
	}

	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(reader.Get(t.Context(), client.ObjectKey{Name: CRDs[1]}, crd)).To(Succeed())
	older := crd.DeepCopy()
	older.Annotations[embedopsv1.SchemaVersionAnnotation] = "0"
	g.Expect(reader.Patch(t.Context(), older, client.MergeFrom(crd))).To(Succeed())
	t.Cleanup(func() {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if reader.Get(context.Background(), client.ObjectKey{Name: CRDs[1]}, live) == nil {
			restored := live.DeepCopy()
			restored.Annotations[embedopsv1.SchemaVersionAnnotation] = strconv.Itoa(embedopsv1.SchemaVersion)
			_ = reader.Patch(context.Background(), restored, client.MergeFrom(live))
		}
	})
	g.Expect(CheckConfig(t.Context(), env.Config)).To(MatchError(ContainSubstring("CRD modelcachebindings.embedops.dev has schema version 0")))
}
