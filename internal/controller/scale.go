package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

// scaleStatus is what the scale subresource and kubectl's columns read of
// a server: status.selector, status.replicas and status.readyReplicas.
type scaleStatus struct {
	selector string
	replicas int32
	ready    int32
}

// scaleOf is the scale status the observation supports: the pod selector,
// which is the server's own and never waits for a child, and the pods the
// StatefulSets it controls count and have ready.
func scaleOf(server *embedopsv1.EmbeddingServer, controlled []appsv1.StatefulSet) scaleStatus {
	scale := scaleStatus{selector: podSelector(server)}
	for i := range controlled {
		scale.replicas += controlled[i].Status.Replicas
		scale.ready += controlled[i].Status.ReadyReplicas
	}
	return scale
}

// reportScale writes the scale status from the observation, before any
// phase can halt: a server that waits for its populate or resolve Job, its
// claims, an ownership conflict or a fix of its spec still has the
// selector an HPA requires (kubernetes v1.37.2
// pkg/controller/podautoscaler/horizontal.go: none is InvalidSelector,
// which Argo CD's HPA health check calls Degraded) and the replica counts
// kubectl shows. reconcileReadiness refines the counts once the children
// are built.
func (r *EmbeddingServerReconciler) reportScale(_ context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	scale := scaleOf(server, scope.observed.controlledStatefulSets(server))
	server.Status.Selector = scale.selector
	server.Status.Replicas, server.Status.ReadyReplicas = scale.replicas, scale.ready
	return ctrl.Result{}, nil
}

// podSelector is status.selector, the scale subresource's label selector:
// the StatefulSet's pod selector as a string.
func podSelector(server *embedopsv1.EmbeddingServer) string {
	return labels.SelectorFromSet(builder.SelectorLabels(server)).String()
}
