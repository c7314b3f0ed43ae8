package ledger

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// reads are the ledger's reads: from the informer cache, and uncached
// where a race needs it. They hold readers only, so what is decided with
// them (choose, the retirement's holder) writes nothing: the Ledger's
// writes carry it out.
type reads struct {
	// cache reads from the informer cache.
	cache client.Reader
	// live reads from the API server.
	live client.Reader
	// shardKeys and selector place bindings in shards (Options).
	shardKeys []string
	selector  labels.Selector
}

// ours reports whether the binding is of this controller's shard: selected
// by its watch label selector, as its cache would hold it.
func (r *reads) ours(binding *embedopsv1.ModelCacheBinding) bool {
	return r.selector.Matches(labels.Set(binding.Labels))
}

// read reads a binding from the API server; nil when it is gone or is
// another shard's.
func (r *reads) read(ctx context.Context, key types.NamespacedName) (*embedopsv1.ModelCacheBinding, error) {
	binding := &embedopsv1.ModelCacheBinding{}
	err := r.live.Get(ctx, key, binding)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading binding %s: %w", key.Name, err)
	case !r.ours(binding):
		return nil, nil
	}
	return binding, nil
}

// statefulSet reads a StatefulSet from the API server; nil when there is
// none.
func (r *reads) statefulSet(ctx context.Context, key types.NamespacedName) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := r.live.Get(ctx, key, sts)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading StatefulSet %s: %w", key.Name, err)
	}
	return sts, nil
}
