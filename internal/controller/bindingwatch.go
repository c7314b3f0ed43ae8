package controller

import (
	"context"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// serversOfBinding are the servers a binding lists in its references: its
// Ready condition is what their CacheReady reads (claims bound, or the
// binding retiring), so they look again when it changes.
func serversOfBinding(_ context.Context, obj client.Object) []reconcile.Request {
	binding, ok := obj.(*embedopsv1.ModelCacheBinding)
	if !ok {
		return nil
	}
	requests := make([]reconcile.Request, 0, len(binding.Status.RequestReferences))
	for _, ref := range binding.Status.RequestReferences {
		requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: binding.Namespace, Name: ref.Name}})
	}
	return requests
}

// bindingReadyChanged passes a binding's updates that change its Ready
// condition (status, reason or message), or mark it out of room (its
// server then moves to new storage, decision.OutOfRoom), only: the
// binding's other writes, most of them this controller's own references,
// change nothing a server reports, and waking every user for them would
// cost requests.
func bindingReadyChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, ok := e.ObjectOld.(*embedopsv1.ModelCacheBinding)
			after, ok2 := e.ObjectNew.(*embedopsv1.ModelCacheBinding)
			if !ok || !ok2 {
				return false
			}
			if decision.OutOfRoom(before) != decision.OutOfRoom(after) {
				return true
			}
			was, is := conditions.Get(before, embedopsv1.ReadyCondition), conditions.Get(after, embedopsv1.ReadyCondition)
			switch {
			case was == nil || is == nil:
				return was != is
			default:
				return was.Status != is.Status || was.Reason != is.Reason || was.Message != is.Message
			}
		},
	}
}
