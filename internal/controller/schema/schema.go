package schema

import (
	"context"
	"fmt"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// CRDs are the names of the CRDs the controller reads and writes.
var CRDs = []string{"embeddingservers.embedops.dev", "modelcachebindings.embedops.dev"}

// Check reads each of CRDs through reader and returns an error naming every
// one whose schema version is older than embedopsv1.SchemaVersion, with the
// command that brings it up to date.
func Check(ctx context.Context, reader client.Reader) error {
	for _, name := range CRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return fmt.Errorf("reading CRD %s: %w", name, err)
		}
		if err := checkVersion(name, crd.Annotations[embedopsv1.SchemaVersionAnnotation]); err != nil {
			return err
		}
	}
	return nil
}

// checkVersion compares one CRD's annotation with the controller's version.
func checkVersion(name, annotation string) error {
	version := embedopsv1.UnversionedSchema
	if annotation != "" {
		parsed, err := strconv.Atoi(annotation)
		if err != nil {
			return fmt.Errorf("CRD %s: annotation %s=%q is not a schema version", name, embedopsv1.SchemaVersionAnnotation, annotation)
		}
		version = parsed
	}
	if version < embedopsv1.SchemaVersion {
		return fmt.Errorf("CRD %s has schema version %d, older than this controller's %d: it would drop or refuse what the controller writes, so the controller does not start. "+
			"upgrade the CRDs first (the chart's crds.enabled, its default, with helm upgrade --take-ownership once if they came from an older chart's crds/ directory; or kubectl apply --server-side --force-conflicts -k config/crd), then restart the controller",
			name, version, embedopsv1.SchemaVersion)
	}
	return nil
}

// CheckConfig is Check through a client of its own for cfg.
func CheckConfig(ctx context.Context, cfg *rest.Config) error {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	reader, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client to read the CRDs: %w", err)
	}
	return Check(ctx, reader)
}
