package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// followRetirement watches the binding until it is Released, printing each
// phase it enters; a watch sees the short Retiring phase that polling could
// miss. The wait is bounded by the binding's retainFor plus timeout.
func (s *session) followRetirement(ctx context.Context, name string, timeout time.Duration) error {
	binding := &embedopsv1.ModelCacheBinding{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.st.Namespace, Name: name}, binding); err != nil {
		return fmt.Errorf("reading binding %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, binding.Spec.Decision.RetainFor.Duration+timeout)
	defer cancel()
	s.printPhase(binding)
	if binding.Status.Phase == embedopsv1.BindingReleased {
		return nil
	}
	watcher, err := s.client.Watch(ctx, &embedopsv1.ModelCacheBindingList{}, &client.ListOptions{
		Namespace:     s.st.Namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
		Raw:           &metav1.ListOptions{ResourceVersion: binding.ResourceVersion},
	})
	if err != nil {
		return fmt.Errorf("watching binding %s: %w", name, err)
	}
	defer watcher.Stop()
	return s.watchPhases(ctx, watcher, binding.Status.Phase)
}

// watchPhases prints every phase change the watch delivers until Released.
func (s *session) watchPhases(ctx context.Context, watcher watch.Interface, phase embedopsv1.BindingPhase) error {
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the old binding to be Released: %w", ctx.Err())
		case event, ok := <-watcher.ResultChan():
			if !ok {
				return fmt.Errorf("the watch of the old binding ended while it was %s", phase)
			}
			binding, isBinding := event.Object.(*embedopsv1.ModelCacheBinding)
			if !isBinding || binding.Status.Phase == phase {
				continue
			}
			phase = binding.Status.Phase
			s.printPhase(binding)
			if phase == embedopsv1.BindingReleased {
				return nil
			}
		}
	}
}

// printPhase says where the binding is in its lifecycle.
func (s *session) printPhase(b *embedopsv1.ModelCacheBinding) {
	now := time.Now().Format(time.TimeOnly)
	switch b.Status.Phase {
	case embedopsv1.BindingActive:
		fmt.Fprintf(s.out, "dev: %s %s is Active, used by %d servers; it retires %s after its last user left (retainFor)\n",
			now, b.Name, len(b.Status.RequestReferences), b.Spec.Decision.RetainFor.Duration)
	case embedopsv1.BindingRetiring:
		fmt.Fprintf(s.out, "dev: %s %s is Retiring (idle since %s, retire after %s): deleting its claims (%d)\n",
			now, b.Name, timeOf(b.Status.IdleSince), timeOf(b.Status.RetireAfter), len(b.Spec.Resources.PersistentVolumeClaimNames))
	case embedopsv1.BindingReleased:
		fmt.Fprintf(s.out, "dev: %s %s is Released at %s: its claims are gone, the binding stays as the record\n",
			now, b.Name, timeOf(b.Status.ReleasedAt))
	default:
		fmt.Fprintf(s.out, "dev: %s %s is %q\n", now, b.Name, b.Status.Phase)
	}
}

// timeOf prints a status time, or a dash when unset.
func timeOf(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.TimeOnly)
}
