package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// retryInterval is how often a broken watch or list is tried again, e.g.
// while kube-apiserver restarts.
const retryInterval = 200 * time.Millisecond

// errGone is a watch whose resourceVersion the API server no longer serves.
var errGone = errors.New("resourceVersion too old")

// stream lists and then watches one kind in one namespace, handing every
// state it sees to its observer. A watch broken by the network resumes
// where it stopped; one the API server can no longer resume (410 Gone,
// e.g. after kube-apiserver restarted) is a gap, closed by listing again.
type stream struct {
	client    client.WithWatch
	namespace string
	newList   func() client.ObjectList
	observer  observer
}

// observer receives what a stream sees. rv is the object's
// resourceVersion, or the list's for objects gone during a gap.
type observer interface {
	// observed is one state of an object; deleted when the watch said so.
	observed(obj client.Object, rv uint64, deleted bool)
	// listed is a complete list at listRV after a gap that began after
	// fromRV (0 for the first list).
	listed(objs []client.Object, fromRV, listRV uint64)
}

// run follows the kind until ctx ends. A watch that ended without an
// event is not restarted at once, so a failing API server is not hammered.
func (s *stream) run(ctx context.Context) {
	rv := s.relist(ctx, 0)
	progressed := true
	for ctx.Err() == nil {
		from := rv
		err := s.watchFrom(ctx, rv, &rv, progressed)
		progressed = rv != from
		if errors.Is(err, errGone) {
			rv = s.relist(ctx, rv)
		}
	}
}

// relist lists the kind, retrying until it succeeds, reports the gap since
// from and returns the list's resourceVersion (0 when ctx ended).
func (s *stream) relist(ctx context.Context, from uint64) uint64 {
	list := s.newList()
	var listRV uint64
	err := wait.PollUntilContextCancel(ctx, retryInterval, true, func(ctx context.Context) (bool, error) {
		if err := s.client.List(ctx, list, client.InNamespace(s.namespace)); err != nil {
			return false, nil
		}
		var err error
		listRV, err = parseRV(list.GetResourceVersion())
		return err == nil, err
	})
	if err != nil {
		return 0
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return 0
	}
	objs := make([]client.Object, 0, len(items))
	for _, item := range items {
		if obj, ok := item.(client.Object); ok {
			objs = append(objs, obj)
		}
	}
	s.observer.listed(objs, from, listRV)
	return listRV
}

// watchFrom watches from rv, updating *last with every resourceVersion
// seen, until the watch ends; it returns errGone when rv is too old. It
// starts after retryInterval unless immediate.
func (s *stream) watchFrom(ctx context.Context, rv uint64, last *uint64, immediate bool) error {
	var w watch.Interface
	err := wait.PollUntilContextCancel(ctx, retryInterval, immediate, func(ctx context.Context) (bool, error) {
		var err error
		w, err = s.client.Watch(ctx, s.newList(), client.InNamespace(s.namespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: strconv.FormatUint(rv, 10), AllowWatchBookmarks: true}})
		if isGone(err) {
			return false, errGone
		}
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	for event := range w.ResultChan() {
		if event.Type == watch.Error {
			if isGone(apierrors.FromObject(event.Object)) {
				return errGone
			}
			return nil
		}
		obj, ok := event.Object.(client.Object)
		if !ok {
			continue
		}
		objRV, err := parseRV(obj.GetResourceVersion())
		if err != nil {
			continue
		}
		*last = objRV
		if event.Type != watch.Bookmark {
			s.observer.observed(obj, objRV, event.Type == watch.Deleted)
		}
	}
	return nil
}

// isGone reports a resourceVersion the API server no longer serves.
func isGone(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// parseRV reads a resourceVersion. They are etcd revisions: one etcd
// orders every write of the cluster, so the tests compare them across
// kinds, which clients of a real cluster must not rely on.
func parseRV(rv string) (uint64, error) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q is not a number: %w", rv, err)
	}
	return n, nil
}
