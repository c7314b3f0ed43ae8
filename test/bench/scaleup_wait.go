package bench

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/populate"
)

// waitPopulated waits until each of n servers in namespace names a
// binding that recorded a commit and a content digest
// (status.realized), and scaleUpFrom of its pods reported both from their
// populate init containers: what the controller needs to find a claim to
// copy (internal/controller/seed.go, populatedClaims).
func (e *Env) waitPopulated(ctx context.Context, namespace string, n int, timeout time.Duration) error {
	return e.waitAll(ctx, "servers populated at a recorded commit", timeout, func(ctx context.Context) (int, int, error) {
		var servers embedopsv1.EmbeddingServerList
		if err := e.Client.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
			return 0, n, err
		}
		var bindings embedopsv1.ModelCacheBindingList
		if err := e.Client.List(ctx, &bindings, client.InNamespace(namespace)); err != nil {
			return 0, n, err
		}
		var pods corev1.PodList
		if err := e.Client.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
			return 0, n, err
		}
		realized := map[string]*embedopsv1.RealizedCache{}
		for i := range bindings.Items {
			realized[bindings.Items[i].Name] = bindings.Items[i].Status.Realized
		}
		done := 0
		for _, server := range servers.Items {
			if populatedReplicas(pods.Items, server.Name, realized[server.Status.CacheBinding]) >= int(scaleUpFrom) {
				done++
			}
		}
		return done, n, nil
	})
}

// waitScaled waits until each of n servers in namespace is Ready for its
// current generation with replicas ready replicas, and returns how long
// after started each was first seen so, in order (to the poll interval).
func (e *Env) waitScaled(ctx context.Context, namespace string, n int, replicas int32, started time.Time, timeout time.Duration) ([]float64, error) {
	seen := map[string]float64{}
	err := e.waitAll(ctx, "servers Ready at the new replicas", timeout, func(ctx context.Context) (int, int, error) {
		var servers embedopsv1.EmbeddingServerList
		if err := e.Client.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
			return len(seen), n, err
		}
		now := time.Since(started).Seconds()
		for i := range servers.Items {
			server := &servers.Items[i]
			if _, ok := seen[server.Name]; !ok && scaledTo(server, replicas) {
				seen[server.Name] = now
			}
		}
		return len(seen), n, nil
	})
	times := make([]float64, 0, len(seen))
	for _, t := range seen {
		times = append(times, t)
	}
	slices.Sort(times)
	return times, err
}

// scaledTo reports whether the server is Ready for its current generation
// with replicas ready replicas.
func scaledTo(server *embedopsv1.EmbeddingServer, replicas int32) bool {
	return isAvailable(server) && server.Status.Replicas == replicas && server.Status.ReadyReplicas == replicas
}

// populatedReplicas counts the pods of the server (embedops.dev/name)
// whose populate init container reported realized's commit and digest;
// none while realized lacks either.
func populatedReplicas(pods []corev1.Pod, server string, realized *embedopsv1.RealizedCache) int {
	if realized == nil || realized.ResolvedCommit == "" || realized.ContentDigest == "" {
		return 0
	}
	n := 0
	for i := range pods {
		if pods[i].Labels[embedopsv1.NameLabel] != server {
			continue
		}
		result, ok := reportedPopulate(&pods[i])
		if ok && result.ResolvedCommit == realized.ResolvedCommit && result.ContentDigest == realized.ContentDigest {
			n++
		}
	}
	return n
}

// reportedPopulate is the result the pod's populate init container wrote
// to its termination message, as the controller reads it: exited 0 with a
// result naming a commit.
func reportedPopulate(pod *corev1.Pod) (populate.Result, bool) {
	for _, status := range pod.Status.InitContainerStatuses {
		terminated := status.State.Terminated
		if status.Name != builder.PopulateContainerName || terminated == nil || terminated.ExitCode != 0 {
			continue
		}
		var result populate.Result
		if err := json.Unmarshal([]byte(terminated.Message), &result); err == nil && result.ResolvedCommit != "" {
			return result, true
		}
	}
	return populate.Result{}, false
}
