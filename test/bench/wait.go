package bench

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Polling and concurrency of the benchmark's own requests.
const (
	// pollInterval is how often a wait lists the objects it waits for.
	pollInterval = time.Second
	// progressInterval is how often a long wait logs how far it got.
	progressInterval = 15 * time.Second
	// workers bounds the benchmark's concurrent create and patch requests.
	workers = 16
	// namespaceTimeout bounds waiting for a namespace's ServiceAccount.
	namespaceTimeout = time.Minute
)

// forEach runs fn for 0..n-1 on at most workers goroutines; the first
// error cancels the rest and is returned.
func forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	group, ctx := errgroup.WithContext(ctx)
	group.SetLimit(workers)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		group.Go(func() error { return fn(ctx, i) })
	}
	return group.Wait()
}

// counter reports how many of the awaited objects are done, of how many.
type counter func(ctx context.Context) (done, total int, err error)

// waitAll polls count until every object is done, logging progress, and
// fails after timeout naming what it waited for and how far it got.
func (e *Env) waitAll(ctx context.Context, what string, timeout time.Duration, count counter) error {
	var done, total int
	var last error
	logged := time.Now()
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		done, total, last = count(ctx)
		if time.Since(logged) >= progressInterval {
			e.logf("waiting for %s: %d of %d", what, done, total)
			logged = time.Now()
		}
		return last == nil && done == total, nil
	})
	switch {
	case err == nil:
		return nil
	case last == nil:
		return fmt.Errorf("waiting for %s: %d of %d after %s: %w", what, done, total, timeout, err)
	default:
		return fmt.Errorf("waiting for %s: %d of %d after %s: %w (last: %w)", what, done, total, timeout, err, last)
	}
}

// CreateNamespace creates a namespace named from prefix and waits until
// kube-controller-manager has created its default ServiceAccount, without
// which pods are refused.
func (e *Env) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := e.Client.Create(ctx, namespace); err != nil {
		return "", fmt.Errorf("creating a namespace: %w", err)
	}
	account := client.ObjectKey{Namespace: namespace.Name, Name: "default"}
	err := wait.PollUntilContextTimeout(ctx, pollInterval/5, namespaceTimeout, true, func(ctx context.Context) (bool, error) {
		return e.Client.Get(ctx, account, &corev1.ServiceAccount{}) == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("waiting for the default ServiceAccount of %s: %w", namespace.Name, err)
	}
	return namespace.Name, nil
}
