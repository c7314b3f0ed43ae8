package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/internal/builder"
)

// kubernetesService is the API server's own Service. Its address family is
// the cluster's primary one: kube-apiserver allocates it from the first
// --service-cluster-ip-range.
var kubernetesService = types.NamespacedName{Namespace: corev1.NamespaceDefault, Name: "kubernetes"}

// factsOf is what the server's children depend on beyond its spec: the
// address family of its Service, the operator's pods that the endpoint
// check asks from (only while the check is on) and the populate deadline.
// They are read once per reconcile and kept in the scope.
func (r *EmbeddingServerReconciler) factsOf(ctx context.Context, scope *serverScope) (builder.Facts, error) {
	if scope.facts != nil {
		return *scope.facts, nil
	}
	ipv6, err := r.serviceHasIPv6(ctx, scope)
	if err != nil {
		return builder.Facts{}, err
	}
	facts := builder.Facts{IPv6: ipv6, PopulateDeadline: r.populateDeadline}
	if r.endpointCheck && r.prober != nil {
		facts.Prober = r.prober.DeepCopy()
	}
	scope.facts = &facts
	return facts, nil
}

// serviceHasIPv6 reports whether the server's Service, as observe saw
// it, lists IPv6 in spec.ipFamilies. Before the Service exists it predicts
// what the API server will give it: the builder sets neither ipFamilies
// nor ipFamilyPolicy, so the Service is SingleStack in the cluster's
// primary family (k8s pkg/registry/core/service/storage/alloc.go,
// initIPFamilyFields), which is the kubernetes Service's. So a new server's
// StatefulSet is built once with the address TEI must listen on.
func (r *EmbeddingServerReconciler) serviceHasIPv6(ctx context.Context, scope *serverScope) (bool, error) {
	if service := scope.observed.service(scope.server); service != nil {
		return hasIPv6(service), nil
	}
	return r.primaryFamily.isIPv6(ctx, r.apiReader)
}

// hasIPv6 reports whether the Service has IPv6 among its families.
func hasIPv6(service *corev1.Service) bool {
	return slices.Contains(service.Spec.IPFamilies, corev1.IPv6Protocol)
}

// primaryFamily remembers the cluster's primary address family once it was
// read: it changes only when the cluster is rebuilt.
type primaryFamily struct {
	mu    sync.Mutex
	known bool
	ipv6  bool
}

// isIPv6 reads the kubernetes Service, uncached, the first time it is
// asked; a failed read is tried again on the next call.
func (p *primaryFamily) isIPv6(ctx context.Context, reader client.Reader) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.ipv6, nil
	}
	service := &corev1.Service{}
	if err := reader.Get(ctx, kubernetesService, service); err != nil {
		return false, fmt.Errorf("reading the kubernetes Service for the cluster's address family: %w", err)
	}
	p.known, p.ipv6 = true, hasIPv6(service)
	return p.ipv6, nil
}
