package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of embedops' kinds.
	GroupVersion = schema.GroupVersion{Group: "embedops.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers both kinds and their lists.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&EmbeddingServer{}, &EmbeddingServerList{},
		&ModelCacheBinding{}, &ModelCacheBindingList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
