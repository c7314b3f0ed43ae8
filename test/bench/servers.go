package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// benchModel is the model every benchmark server serves.
const benchModel = "BAAI/bge-small-en-v1.5"

// benchRevision is the git revision every benchmark server declares, as a
// server from git does (embedopsv1.SourceRevisionAnnotation): its cache
// decision is recorded with a known source, without the Warning event an
// unknown source gets. (Flux and Argo CD labels would cost one uncached
// read of the Kustomization or Application per new binding instead.)
const benchRevision = "main@sha1:0123456789abcdef0123456789abcdef01234567"

// serverName names the i-th benchmark server and its children.
func serverName(i int) string { return fmt.Sprintf("s%d", i) }

// CreateServers creates n servers s0..s<n-1> in namespace, with every
// default (one replica, a PerReplica cache) and a declared revision, on the
// worker pool.
func (e *Env) CreateServers(ctx context.Context, namespace string, n int) error {
	return e.CreateServersWith(ctx, namespace, n, nil)
}

// CreateServersWith is CreateServers with adjust, when not nil, applied to
// each server before it is created.
func (e *Env) CreateServersWith(ctx context.Context, namespace string, n int, adjust func(*embedopsv1.EmbeddingServer)) error {
	return forEach(ctx, n, func(ctx context.Context, i int) error {
		server := &embedopsv1.EmbeddingServer{
			ObjectMeta: metav1.ObjectMeta{Name: serverName(i), Namespace: namespace,
				Annotations: map[string]string{embedopsv1.SourceRevisionAnnotation: benchRevision}},
			Spec: embedopsv1.EmbeddingServerSpec{Model: embedopsv1.ModelSpec{Name: benchModel}},
		}
		if adjust != nil {
			adjust(server)
		}
		if err := e.Client.Create(ctx, server); err != nil {
			return fmt.Errorf("creating server %s: %w", server.Name, err)
		}
		return nil
	})
}

// WaitConverged waits until n servers in namespace are Ready and bound.
func (e *Env) WaitConverged(ctx context.Context, namespace string, n int, timeout time.Duration) error {
	return e.waitAll(ctx, "servers Ready and bound", timeout, func(ctx context.Context) (int, int, error) {
		servers, active, err := e.serversAndActiveBindings(ctx, namespace)
		if err != nil {
			return 0, n, err
		}
		done := 0
		for i := range servers {
			if isAvailable(&servers[i]) && active[servers[i].Status.CacheBinding] {
				done++
			}
		}
		return done, n, nil
	})
}

// serversAndActiveBindings lists the servers of namespace and the names of
// its Active bindings.
func (e *Env) serversAndActiveBindings(ctx context.Context, namespace string) ([]embedopsv1.EmbeddingServer, map[string]bool, error) {
	var servers embedopsv1.EmbeddingServerList
	if err := e.Client.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
		return nil, nil, err
	}
	var bindings embedopsv1.ModelCacheBindingList
	if err := e.Client.List(ctx, &bindings, client.InNamespace(namespace)); err != nil {
		return nil, nil, err
	}
	active := map[string]bool{}
	for _, binding := range bindings.Items {
		active[binding.Name] = binding.Status.Phase == embedopsv1.BindingActive
	}
	return servers.Items, active, nil
}

// isAvailable checks Ready=True/Available for the current generation.
func isAvailable(server *embedopsv1.EmbeddingServer) bool {
	return server.Status.ObservedGeneration == server.Generation &&
		conditions.IsTrue(server, embedopsv1.ReadyCondition) &&
		conditions.GetReason(server, embedopsv1.ReadyCondition) == embedopsv1.AvailableReason
}
