package upgrade

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// The kinds of embedops, read as stored rather than through a Go type, so
// that no type of either release drops a field unseen.
var (
	serverGVK  = embedopsv1.GroupVersion.WithKind(embedopsv1.EmbeddingServerKind)
	bindingGVK = embedopsv1.GroupVersion.WithKind("ModelCacheBinding")
)

// childKinds are the other objects of the namespace, the servers' children
// and what the examples brought: their identity must survive the upgrade.
var childKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "Pod"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ConfigMap"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
}

// snapshot is what the upgrade must keep in a namespace.
type snapshot struct {
	servers      map[string]*unstructured.Unstructured
	bindings     map[string]*unstructured.Unstructured
	statefulSets map[string]*appsv1.StatefulSet
	// children are the UIDs of the other objects, by "Kind/name".
	children map[string]types.UID
}

// takeSnapshot reads the namespace's servers, bindings, StatefulSets and
// other objects.
func takeSnapshot(ctx context.Context, g Gomega, namespace string) *snapshot {
	s := &snapshot{
		servers:      listStored(ctx, g, namespace, serverGVK),
		bindings:     listStored(ctx, g, namespace, bindingGVK),
		statefulSets: map[string]*appsv1.StatefulSet{},
		children:     map[string]types.UID{},
	}
	var sets appsv1.StatefulSetList
	g.Expect(env.Client.List(ctx, &sets, client.InNamespace(namespace))).To(Succeed())
	for i := range sets.Items {
		s.statefulSets[sets.Items[i].Name] = &sets.Items[i]
	}
	for _, kind := range childKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
		g.Expect(env.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		for _, item := range list.Items {
			s.children[kind.Kind+"/"+item.Name] = item.UID
		}
	}
	return s
}

// kinds counts the other objects by kind.
func (s *snapshot) kinds() map[string]int {
	counts := map[string]int{}
	for key := range s.children {
		kind, _, _ := strings.Cut(key, "/")
		counts[kind]++
	}
	return counts
}

// listStored lists the objects of kind in namespace as stored, by name.
func listStored(ctx context.Context, g Gomega, namespace string, kind schema.GroupVersionKind) map[string]*unstructured.Unstructured {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
	g.Expect(env.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	byName := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		byName[list.Items[i].GetName()] = &list.Items[i]
	}
	return byName
}

// compareSnapshots reports, field by field, every change from before to
// after that the upgrade must not make:
//
//   - a server's identity, generation or spec (the controller never writes
//     a spec; status is its report and may change);
//   - a StatefulSet's identity, generation, spec or revision: a new pod
//     template is a rolling restart of the server, a new claim template a
//     recreated StatefulSet (but for the one intended roll, intendedRoll);
//   - a binding's identity, generation, spec (its decision and source) or
//     the record in its status (phase, references, realized cache,
//     retirement times, successor); only its conditions, a report, may be
//     refreshed;
//   - any other object created, deleted or recreated.
func compareSnapshots(t *testing.T, before, after *snapshot) {
	sameNames(t, "servers", before.servers, after.servers)
	for name, b := range before.servers {
		if a, ok := after.servers[name]; ok {
			sameStored(t, "server "+name, b, a, "spec")
		}
	}
	sameNames(t, "StatefulSets", before.statefulSets, after.statefulSets)
	for name, b := range before.statefulSets {
		a, ok := after.statefulSets[name]
		if !ok {
			continue
		}
		b = intendedRoll(t, name, b, a)
		if a.UID != b.UID || a.Generation != b.Generation {
			t.Errorf("StatefulSet %s: uid %s generation %d became uid %s generation %d", name, b.UID, b.Generation, a.UID, a.Generation)
		}
		if diff := cmp.Diff(b.Spec.Template, a.Spec.Template); diff != "" {
			t.Errorf("StatefulSet %s: the pod template changed, which restarts every replica (-previous +current):\n%s", name, diff)
		}
		if diff := cmp.Diff(b.Spec, a.Spec); diff != "" {
			t.Errorf("StatefulSet %s: the spec changed (-previous +current):\n%s", name, diff)
		}
		if a.Status.UpdateRevision != b.Status.UpdateRevision {
			t.Errorf("StatefulSet %s: revision %s became %s", name, b.Status.UpdateRevision, a.Status.UpdateRevision)
		}
		if a.UID == b.UID && a.Generation == b.Generation && a.ResourceVersion != b.ResourceVersion {
			t.Logf("StatefulSet %s was written (resourceVersion %s -> %s) without a change of spec", name, b.ResourceVersion, a.ResourceVersion)
		}
	}
	sameNames(t, "bindings", before.bindings, after.bindings)
	for name, b := range before.bindings {
		a, ok := after.bindings[name]
		if !ok {
			continue
		}
		sameStored(t, "binding "+name, b, a, "spec")
		changed, added := compareValues("status", bindingRecord(b), bindingRecord(a))
		for _, change := range changed {
			t.Errorf("binding %s: its record changed: %s", name, change)
		}
		for _, path := range added {
			t.Logf("binding %s: %s was recorded by the current release", name, path)
		}
		if a.GetResourceVersion() != b.GetResourceVersion() {
			t.Logf("binding %s: its conditions were written (resourceVersion %s -> %s), its record unchanged", name,
				b.GetResourceVersion(), a.GetResourceVersion())
		}
	}
	if diff := cmp.Diff(before.children, after.children); diff != "" {
		t.Errorf("objects were created, deleted or recreated (-previous +current uid):\n%s", diff)
	}
}

// sameNames reports names present on one side only.
func sameNames[V any](t *testing.T, what string, before, after map[string]V) {
	t.Helper()
	b, a := slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after))
	if diff := cmp.Diff(b, a); diff != "" {
		t.Errorf("%s: a different set after the upgrade (-previous +current):\n%s", what, diff)
	}
}

// sameStored reports a change of uid or generation, and every value of
// the field that changed or went away. Added values are logged: they are
// the new schema's defaults, which the API server applies when it reads an
// object stored before them (structural defaulting), without writing it.
func sameStored(t *testing.T, what string, before, after *unstructured.Unstructured, field string) {
	t.Helper()
	if after.GetUID() != before.GetUID() || after.GetGeneration() != before.GetGeneration() {
		t.Errorf("%s: uid %s generation %d became uid %s generation %d", what,
			before.GetUID(), before.GetGeneration(), after.GetUID(), after.GetGeneration())
	}
	changed, added := compareValues(field, before.Object[field], after.Object[field])
	for _, change := range changed {
		t.Errorf("%s: %s", what, change)
	}
	for _, path := range added {
		t.Logf("%s: %s was added, a default of the current schema", what, path)
	}
}

// compareValues walks before and after together and returns what changed
// or went away, and the paths only after has.
func compareValues(path string, before, after any) (changed, added []string) {
	b, bIsMap := before.(map[string]any)
	a, aIsMap := after.(map[string]any)
	if bIsMap && aIsMap {
		for _, key := range slices.Sorted(maps.Keys(b)) {
			c, d := compareValues(path+"."+key, b[key], a[key])
			changed, added = append(changed, c...), append(added, d...)
		}
		for _, key := range slices.Sorted(maps.Keys(a)) {
			if _, ok := b[key]; !ok {
				added = append(added, path+"."+key)
			}
		}
		return changed, added
	}
	bList, bIsList := before.([]any)
	aList, aIsList := after.([]any)
	if bIsList && aIsList && len(bList) == len(aList) {
		for i := range bList {
			c, d := compareValues(fmt.Sprintf("%s[%d]", path, i), bList[i], aList[i])
			changed, added = append(changed, c...), append(added, d...)
		}
		return changed, added
	}
	if diff := cmp.Diff(before, after); diff != "" {
		changed = append(changed, fmt.Sprintf("%s changed (-previous +current):\n%s", path, diff))
	}
	return changed, added
}

// bindingRecord is a binding's status without its conditions and the
// generation they observed: what the binding records rather than reports.
func bindingRecord(binding *unstructured.Unstructured) map[string]any {
	status, _, _ := unstructured.NestedMap(binding.Object, "status")
	delete(status, "conditions")
	delete(status, "observedGeneration")
	return status
}
