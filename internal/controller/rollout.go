package controller

import (
	"fmt"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// appliedStatefulSet is the StatefulSet a reconcile changed, as the API
// server returned it.
type appliedStatefulSet struct {
	uid        types.UID
	generation int64
}

// appliedKey names one StatefulSet of a server: a server has several while
// its storage changes.
type appliedKey struct {
	server types.UID
	name   string
}

// rollouts remembers, per StatefulSet of a server, the last change this
// process made, so a cache that has not seen that change yet is never read
// as a finished rollout. It is safe for concurrent use.
type rollouts struct {
	applied sync.Map // appliedKey -> appliedStatefulSet
	// replacedSets holds, per server, the UID of the StatefulSet this
	// process deleted to replace it: the cache may still show it.
	replacedSets sync.Map
}

// record remembers the StatefulSet named name the server's reconcile
// changed.
func (r *rollouts) record(server types.UID, name string, sts appliedStatefulSet) {
	r.applied.Store(appliedKey{server: server, name: name}, sts)
}

// forget drops what is remembered of a deleted server.
func (r *rollouts) forget(server types.UID) {
	r.applied.Range(func(key, _ any) bool {
		if key.(appliedKey).server == server {
			r.applied.Delete(key)
		}
		return true
	})
	r.replacedSets.Delete(server)
}

// replaced remembers the StatefulSet deleted to replace it.
func (r *rollouts) replaced(server, statefulSet types.UID) {
	r.replacedSets.Store(server, statefulSet)
}

// isReplaced reports whether statefulSet is one this process deleted to
// replace it.
func (r *rollouts) isReplaced(server, statefulSet types.UID) bool {
	value, ok := r.replacedSets.Load(server)
	return ok && value.(types.UID) == statefulSet
}

// seen reports whether the StatefulSet read from the cache is the one this
// process last changed under its name for the server, at that generation
// or later.
func (r *rollouts) seen(server types.UID, statefulSet *appsv1.StatefulSet) bool {
	value, ok := r.applied.Load(appliedKey{server: server, name: statefulSet.Name})
	if !ok {
		return true
	}
	applied := value.(appliedStatefulSet)
	return statefulSet.UID == applied.uid && statefulSet.Generation >= applied.generation
}

// rolloutInProgress says why the StatefulSet's pods are not all at its
// update revision yet, or "" when the rollout is complete. It applies
// kstatus's StatefulSet rules (fluxcd/cli-utils pkg/kstatus/status/core.go,
// stsConditions: observed generation, replicas, ready, current and updated
// replicas, currentRevision == updateRevision), the rules Flux's and Argo
// CD's health checks read too.
func rolloutInProgress(statefulSet *appsv1.StatefulSet) string {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(statefulSet)
	if err != nil {
		return fmt.Sprintf("reading the StatefulSet's status: %v", err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetAPIVersion(appsv1.SchemeGroupVersion.String())
	u.SetKind("StatefulSet")
	result, err := status.Compute(u)
	if err != nil {
		return fmt.Sprintf("reading the StatefulSet's status: %v", err)
	}
	if result.Status == status.CurrentStatus {
		return ""
	}
	return result.Message
}
