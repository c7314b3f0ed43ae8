package watch

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// CacheOptions returns the informer cache options of the manager, used by
// NewManager and by the tests alike. Pods, StatefulSets, Services,
// PersistentVolumeClaims, PodDisruptionBudgets and NetworkPolicies are
// listed and watched server-side only when they carry embedopsv1.NameLabel,
// and Jobs only when they carry
// embedopsv1.PopulatesLabel, so memory grows with the servers, not with the
// cluster. Pods are trimmed to what the diagnostics read. Secrets are not
// cached at all (see ClientOptions).
//
// EmbeddingServers and ModelCacheBindings are listed and watched only when
// they match watch, the --watch-label-selector of a shard (Flux's
// sharding): a binding carries its server's shard labels (ShardKeys), so a
// shard sees the bindings of its servers and no others. Children are
// selected by embedops' own labels, whatever their server's shard, so no
// shard misses its servers' children; a server's reconcile reads only its
// own children.
func CacheOptions(watch labels.Selector) cache.Options {
	owned := ownedSelector()
	options := cache.Options{
		DefaultTransform: stripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: owned, Transform: trimPod},
			&appsv1.StatefulSet{}:           {Label: owned, Transform: stripManagedFields},
			&corev1.Service{}:               {Label: owned, Transform: stripManagedFields},
			&corev1.PersistentVolumeClaim{}: {Label: owned, Transform: stripManagedFields},
			&policyv1.PodDisruptionBudget{}: {Label: owned, Transform: stripManagedFields},
			&networkingv1.NetworkPolicy{}:   {Label: owned, Transform: stripManagedFields},
			&batchv1.Job{}:                  {Label: labelExists(embedopsv1.PopulatesLabel), Transform: stripManagedFields},
		},
	}
	if watch != nil && !watch.Empty() {
		options.ByObject[&embedopsv1.EmbeddingServer{}] = cache.ByObject{Label: watch, Transform: stripManagedFields}
		options.ByObject[&embedopsv1.ModelCacheBinding{}] = cache.ByObject{Label: watch, Transform: stripManagedFields}
	}
	return options
}

// ClientOptions returns the manager's client options: Secrets are never read
// through the cache, so a stray Get cannot start an informer holding their
// data; a token or API key Secret is read by name when a reconcile needs it,
// so memory does not grow with the cluster's Secrets. Every write asks for
// strict field validation: kube-apiserver's default, Warn, drops a field
// the installed CRD lacks with only a warning (k8s.io/apiserver v0.37.2
// pkg/endpoints/handlers/rest.go, fieldValidation), so a controller over
// CRDs older than itself (helm upgrade leaves crds/ as they were) would
// lose what it writes without a word; Strict refuses the write instead.
func ClientOptions() client.Options {
	return client.Options{
		Cache:           &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}},
		FieldValidation: metav1.FieldValidationStrict,
	}
}

// ownedSelector selects objects carrying embedopsv1.NameLabel.
func ownedSelector() labels.Selector {
	return labelExists(embedopsv1.NameLabel)
}

// labelExists selects objects carrying the label key.
func labelExists(key string) labels.Selector {
	requirement, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	return labels.NewSelector().Add(*requirement)
}

// stripManagedFields drops managedFields, which the controller never reads.
func stripManagedFields(in any) (any, error) {
	if obj, err := meta.Accessor(in); err == nil && obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	return in, nil
}

// trimPod keeps what the diagnostics and the watch read: identity, labels,
// owners, the node name, the phase, conditions and container statuses.
func trimPod(in any) (any, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		// Tombstones (toolscache.DeletedFinalStateUnknown) pass unchanged.
		return in, nil
	}
	trimmed := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Generation:        pod.Generation,
			CreationTimestamp: pod.CreationTimestamp,
			DeletionTimestamp: pod.DeletionTimestamp,
			Labels:            pod.Labels,
			OwnerReferences:   pod.OwnerReferences,
		},
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: corev1.PodStatus{
			Phase:                 pod.Status.Phase,
			Conditions:            pod.Status.Conditions,
			ContainerStatuses:     pod.Status.ContainerStatuses,
			InitContainerStatuses: pod.Status.InitContainerStatuses,
		},
	}
	return trimmed, nil
}

var _ toolscache.TransformFunc = trimPod
