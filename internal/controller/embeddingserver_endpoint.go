package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// reconcileEndpoint asks an Available server's Service for TEI's /info when
// the check is on, and records the answer in status.served. Ready pods that
// do not answer make Ready=False EndpointUnavailable, a wait retried after
// the progress interval; status.served then keeps the last answer, which
// the Ready condition marks as stale. A served commit other than the one
// the binding recorded is noted in Ready's message, which stays True, and
// announced by a Warning event when the fetched message did not note it. An answering server is asked again
// after the endpoint interval.
func (r *EmbeddingServerReconciler) reconcileEndpoint(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	if !r.endpointCheck || conditions.GetReason(server, embedopsv1.ReadyCondition) != embedopsv1.AvailableReason ||
		!conditions.IsTrue(server, embedopsv1.ReadyCondition) {
		return ctrl.Result{}, nil
	}
	url := infoURL(scope.service)
	if url == "" {
		return ctrl.Result{}, nil
	}
	served, err := r.endpoint.Info(ctx, url)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("endpoint unavailable", "url", url, "error", err.Error())
		conditions.MarkFalse(server, embedopsv1.ReadyCondition, embedopsv1.EndpointUnavailableReason,
			"%s but the Service does not answer: %s", conditions.GetMessage(server, embedopsv1.ReadyCondition), err.Error())
		return ctrl.Result{RequeueAfter: r.progressInterval}, nil
	}
	server.Status.Served = served
	recheck := ctrl.Result{RequeueAfter: r.endpointInterval}
	if !revisionMismatch(served, scope.resolvedCommit) {
		return recheck, nil
	}
	message := fmt.Sprintf("TEI serves model commit %s, the binding recorded %s", served.ModelSHA, scope.resolvedCommit)
	conditions.MarkTrue(server, embedopsv1.ReadyCondition, embedopsv1.AvailableReason,
		"%s; %s", conditions.GetMessage(server, embedopsv1.ReadyCondition), message)
	if before := scope.readyBefore; before == nil || !strings.Contains(before.Message, message) {
		r.events.Eventf(server, nil, corev1.EventTypeWarning, embedopsv1.ServedRevisionMismatchReason, "Reconcile", "%s", message)
	}
	return recheck, nil
}

// endpointCheckState is the status.endpointCheck of the check being on.
func endpointCheckState(enabled bool) embedopsv1.EndpointCheckState {
	if enabled {
		return embedopsv1.EndpointCheckEnabled
	}
	return embedopsv1.EndpointCheckDisabled
}

// infoURL is the /info address of the client Service. It ends in ".svc",
// which the pod's DNS search path completes whatever the cluster domain.
func infoURL(service *corev1.Service) string {
	if service == nil || len(service.Spec.Ports) == 0 {
		return ""
	}
	return fmt.Sprintf("http://%s.%s.svc:%d/info", service.Name, service.Namespace, service.Spec.Ports[0].Port)
}

// revisionMismatch is true when TEI reports a model commit and the binding
// recorded another.
func revisionMismatch(served *embedopsv1.ServedModel, resolvedCommit string) bool {
	return served != nil && served.ModelSHA != "" && resolvedCommit != "" && served.ModelSHA != resolvedCommit
}
