// Package rollout drives a server through the changes of its cache decision
// on a running cluster and measures, for each, the fewest ready endpoints
// its Service had and how long the change took: the figures test/e2e checks
// and `make bench --mode rollout` prints.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// SampleInterval is how often the Service's ready endpoints are counted:
// four times a second, so a dip shorter than a one-second sampling is seen.
const SampleInterval = 250 * time.Millisecond

// pollInterval is how often a change is checked for completion.
const pollInterval = 250 * time.Millisecond

// Change is one change of a server's cache decision.
type Change struct {
	Name  string
	Apply func(*embedopsv1.EmbeddingServer)
	// Rolls: the change needs new storage, so the pods move to a new
	// StatefulSet; otherwise the StatefulSet stays as it is.
	Rolls bool
}

// Changes are the changes, in order: retainFor (to retainFor),
// revision, size (onto new volumes: the cluster's default class does not
// expand), StorageClass (to expandable, which must allow volume
// expansion), size again (grown in place) and mode.
func Changes(retainFor time.Duration, expandable string) []Change {
	return []Change{
		{"retainFor", func(s *embedopsv1.EmbeddingServer) {
			s.Spec.Cache.RetainFor = &metav1.Duration{Duration: retainFor}
		}, false},
		{"revision", func(s *embedopsv1.EmbeddingServer) { s.Spec.Model.Revision = "refs/pr/1" }, true},
		{"size", func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Size = new(resource.MustParse("20Gi")) }, true},
		{"storage class", func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.StorageClassName = expandable }, true},
		{"size in place", func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Size = new(resource.MustParse("30Gi")) }, false},
		{"mode", func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Mode = embedopsv1.CacheModeShared }, true},
	}
}

// Result is what one change did.
type Result struct {
	Change string `json:"change"`
	// FewestReady is the fewest ready endpoints of the server's Service
	// seen while the change rolled, of Replicas.
	FewestReady int   `json:"fewestReady"`
	Replicas    int32 `json:"replicas"`
	Samples     int   `json:"samples"`
	// Seconds is how long the change took to complete: the server Ready at
	// its new generation with one StatefulSet left.
	Seconds float64 `json:"seconds"`
	// From and To name the StatefulSet before and after; FromUID and ToUID
	// tell whether it was replaced.
	From    string    `json:"from"`
	To      string    `json:"to"`
	FromUID types.UID `json:"-"`
	ToUID   types.UID `json:"-"`
	// Generation before and after, of the StatefulSet.
	FromGeneration int64 `json:"-"`
	ToGeneration   int64 `json:"-"`
}

// Run applies each change to the server in turn, waiting for each to
// complete within timeout, while counting its Service's ready endpoints.
func Run(ctx context.Context, c client.Client, cs kubernetes.Interface, key types.NamespacedName, changes []Change, timeout time.Duration) ([]Result, error) {
	var results []Result
	for _, change := range changes {
		result, err := runOne(ctx, c, cs, key, change, timeout)
		if err != nil {
			return results, fmt.Errorf("change %s: %w", change.Name, err)
		}
		results = append(results, result)
	}
	return results, nil
}

func runOne(ctx context.Context, c client.Client, cs kubernetes.Interface, key types.NamespacedName, change Change, timeout time.Duration) (Result, error) {
	before, err := onlyStatefulSet(ctx, c, key, timeout)
	if err != nil {
		return Result{}, err
	}
	sampler := sampleReadyEndpoints(ctx, cs, key)
	start := time.Now()
	if err := update(ctx, c, key, change.Apply); err != nil {
		_, _, _ = sampler.stop()
		return Result{}, err
	}
	server, err := waitRolledOut(ctx, c, key, timeout)
	took := time.Since(start)
	fewest, samples, sampleErr := sampler.stop()
	if err != nil {
		return Result{}, err
	}
	if sampleErr != nil {
		return Result{}, fmt.Errorf("counting ready endpoints: %w", sampleErr)
	}
	after, err := onlyStatefulSet(ctx, c, key, timeout)
	if err != nil {
		return Result{}, err
	}
	return Result{
		Change: change.Name, FewestReady: fewest, Replicas: server.GetReplicas(), Samples: samples,
		Seconds: took.Round(100 * time.Millisecond).Seconds(),
		From:    before.Name, To: after.Name, FromUID: before.UID, ToUID: after.UID,
		FromGeneration: before.Generation, ToGeneration: after.Generation,
	}, nil
}

// update changes the server, again on a conflict with the controller.
func update(ctx context.Context, c client.Client, key types.NamespacedName, apply func(*embedopsv1.EmbeddingServer)) error {
	return wait.PollUntilContextTimeout(ctx, pollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		server := &embedopsv1.EmbeddingServer{}
		if err := c.Get(ctx, key, server); err != nil {
			return false, err
		}
		apply(server)
		err := c.Update(ctx, server)
		return err == nil, client.IgnoreNotFound(ignoreConflict(err))
	})
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// waitRolledOut waits until the server is Ready (Available) at its current
// generation and has one StatefulSet left.
func waitRolledOut(ctx context.Context, c client.Client, key types.NamespacedName, timeout time.Duration) (*embedopsv1.EmbeddingServer, error) {
	server := &embedopsv1.EmbeddingServer{}
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, server); err != nil {
			return false, err
		}
		sets, err := statefulSets(ctx, c, key)
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("generation %d observed %d, Ready %s: %s, %d StatefulSets", server.Generation, server.Status.ObservedGeneration,
			conditions.GetReason(server, embedopsv1.ReadyCondition), conditions.GetMessage(server, embedopsv1.ReadyCondition), len(sets))
		return server.Status.ObservedGeneration == server.Generation &&
			conditions.GetReason(server, embedopsv1.ReadyCondition) == embedopsv1.AvailableReason &&
			conditions.IsTrue(server, embedopsv1.ReadyCondition) && len(sets) == 1, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the change to roll out (%s): %w", last, err)
	}
	return server, nil
}

// onlyStatefulSet waits until the server has one StatefulSet and returns it.
func onlyStatefulSet(ctx context.Context, c client.Client, key types.NamespacedName, timeout time.Duration) (*appsv1.StatefulSet, error) {
	var only *appsv1.StatefulSet
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		sets, err := statefulSets(ctx, c, key)
		if err != nil || len(sets) != 1 {
			return false, err
		}
		only = &sets[0]
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for one StatefulSet of %s: %w", key.Name, err)
	}
	return only, nil
}

// statefulSets are the server's StatefulSets.
func statefulSets(ctx context.Context, c client.Client, key types.NamespacedName) ([]appsv1.StatefulSet, error) {
	var list appsv1.StatefulSetList
	err := c.List(ctx, &list, client.InNamespace(key.Namespace), client.MatchingLabels{embedopsv1.NameLabel: key.Name})
	return list.Items, err
}

// sampler counts a Service's ready endpoints every SampleInterval.
type sampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	fewest  int
	samples int
	err     error
}

// sampleReadyEndpoints starts counting the ready endpoints of the Service
// named as the server, as kube-proxy reads them: the EndpointSlices
// labelled with the Service's name, an endpoint serving when its ready
// condition is not false (k8s.io/api/discovery/v1 EndpointConditions: nil
// means ready).
func sampleReadyEndpoints(ctx context.Context, cs kubernetes.Interface, service types.NamespacedName) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{}), fewest: -1}
	go func() {
		defer close(s.done)
		_ = wait.PollUntilContextCancel(ctx, SampleInterval, true, func(ctx context.Context) (bool, error) {
			n, err := readyEndpoints(ctx, cs, service)
			s.record(n, err)
			return false, nil
		})
	}()
	return s
}

// record keeps the fewest count seen and the first error.
func (s *sampler) record(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil && s.err == nil && !errors.Is(err, context.Canceled):
		s.err = err
	case err == nil:
		s.samples++
		if s.fewest < 0 || n < s.fewest {
			s.fewest = n
		}
	}
}

// stop ends the sampling and returns the fewest ready endpoints seen, how
// many samples were taken, and the first error of a sample.
func (s *sampler) stop() (int, int, error) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fewest, s.samples, s.err
}

// readyEndpoints counts the pods the Service's EndpointSlices list as ready.
func readyEndpoints(ctx context.Context, cs kubernetes.Interface, service types.NamespacedName) (int, error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(service.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service.Name,
	})
	if err != nil {
		return 0, err
	}
	ready := map[string]bool{}
	for _, slice := range slices.Items {
		for _, endpoint := range slice.Endpoints {
			if endpoint.Conditions.Ready != nil && !*endpoint.Conditions.Ready {
				continue
			}
			name := endpoint.Addresses[0]
			if endpoint.TargetRef != nil {
				name = endpoint.TargetRef.Name
			}
			ready[name] = true
		}
	}
	return len(ready), nil
}
