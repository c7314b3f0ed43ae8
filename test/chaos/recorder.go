package chaos

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Recorder watches the bindings, claims and pods of one namespace for the
// length of a run: every state each binding was seen in, every claim
// deletion and when each pod mounting a claim lived, each at its
// resourceVersion, so that claim deletions can be judged against the phase
// their binding had at that moment (UnsafeClaimDeletions) and the pods
// that still mounted them (MountedClaimDeletions).
type Recorder struct {
	mu        sync.Mutex
	bindings  map[types.UID]*bindingHistory
	gaps      []gap
	claims    map[types.UID]claimSeen
	deletions map[types.UID]ClaimDeletion
	pods      map[types.UID]*podSeen
	listed    map[string]bool
	cancel    context.CancelFunc
	done      sync.WaitGroup
}

// ClaimDeletion is a claim seen deleted: marked for deletion, or gone.
type ClaimDeletion struct {
	// Name and UID of the claim.
	Name string
	UID  types.UID
	// RV is the resourceVersion of the deletion; for a deletion that fell
	// in a watch gap, the later resourceVersion of the list that found it.
	RV uint64
	// At is when the recorder saw it.
	At time.Time
}

// claimSeen is the last state of a claim the recorder saw.
type claimSeen struct {
	name string
	rv   uint64
}

// gap is a stretch of the binding watch whose events may be missing.
type gap struct{ from, to uint64 }

// StartRecorder starts watching namespace and returns once both watches
// have listed. Stop ends them.
func StartRecorder(ctx context.Context, c client.WithWatch, namespace string) (*Recorder, error) {
	r := &Recorder{
		bindings:  map[types.UID]*bindingHistory{},
		claims:    map[types.UID]claimSeen{},
		deletions: map[types.UID]ClaimDeletion{},
		pods:      map[types.UID]*podSeen{},
		listed:    map[string]bool{},
	}
	ctx, r.cancel = context.WithCancel(ctx)
	streams := []*stream{
		{client: c, namespace: namespace, newList: func() client.ObjectList { return &embedopsv1.ModelCacheBindingList{} }, observer: bindingObserver{r}},
		{client: c, namespace: namespace, newList: func() client.ObjectList { return &corev1.PersistentVolumeClaimList{} }, observer: claimObserver{r}},
		{client: c, namespace: namespace, newList: func() client.ObjectList { return &corev1.PodList{} }, observer: podObserver{r}},
	}
	for _, s := range streams {
		r.done.Go(func() { s.run(ctx) })
	}
	err := wait.PollUntilContextTimeout(ctx, retryInterval, time.Minute, true, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.listed) == len(streams), nil
	})
	if err != nil {
		r.Stop()
		return nil, fmt.Errorf("starting the recorder: %w", err)
	}
	return r, nil
}

// Stop ends the watches.
func (r *Recorder) Stop() {
	r.cancel()
	r.done.Wait()
}

// bindingObserver records binding states into its Recorder.
type bindingObserver struct{ r *Recorder }

func (o bindingObserver) observed(obj client.Object, rv uint64, deleted bool) {
	binding, ok := obj.(*embedopsv1.ModelCacheBinding)
	if !ok {
		return
	}
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.history(binding).add(sampleOf(binding, rv, deleted))
}

func (o bindingObserver) listed(objs []client.Object, fromRV, listRV uint64) {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.listed["bindings"] = true
	if fromRV != 0 {
		o.r.gaps = append(o.r.gaps, gap{from: fromRV, to: listRV})
	}
	present := map[types.UID]bool{}
	for _, obj := range objs {
		if binding, ok := obj.(*embedopsv1.ModelCacheBinding); ok {
			present[binding.UID] = true
			rv, _ := parseRV(binding.ResourceVersion)
			o.r.history(binding).add(sampleOf(binding, rv, false))
		}
	}
	for uid, h := range o.r.bindings {
		if !present[uid] && !h.gone() {
			// Deleted during the gap, in a state nobody saw.
			h.add(sample{rv: listRV, deleted: true, unseen: true})
		}
	}
}

// history returns the binding's history, creating it.
func (r *Recorder) history(binding *embedopsv1.ModelCacheBinding) *bindingHistory {
	h, ok := r.bindings[binding.UID]
	if !ok {
		h = &bindingHistory{name: binding.Name}
		r.bindings[binding.UID] = h
	}
	return h
}

// claimObserver records claim deletions into its Recorder.
type claimObserver struct{ r *Recorder }

func (o claimObserver) observed(obj client.Object, rv uint64, deleted bool) {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.claims[obj.GetUID()] = claimSeen{name: obj.GetName(), rv: rv}
	if deleted || obj.GetDeletionTimestamp() != nil {
		o.r.deleted(obj.GetUID(), obj.GetName(), rv)
	}
}

func (o claimObserver) listed(objs []client.Object, _, listRV uint64) {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	o.r.listed["claims"] = true
	present := map[types.UID]bool{}
	for _, obj := range objs {
		present[obj.GetUID()] = true
		rv, _ := parseRV(obj.GetResourceVersion())
		o.r.claims[obj.GetUID()] = claimSeen{name: obj.GetName(), rv: rv}
		if obj.GetDeletionTimestamp() != nil {
			o.r.deleted(obj.GetUID(), obj.GetName(), rv)
		}
	}
	for uid, seen := range o.r.claims {
		if !present[uid] {
			o.r.deleted(uid, seen.name, listRV)
		}
	}
}

// deleted records a claim's deletion the first time it is seen.
func (r *Recorder) deleted(uid types.UID, name string, rv uint64) {
	if _, seen := r.deletions[uid]; !seen {
		r.deletions[uid] = ClaimDeletion{Name: name, UID: uid, RV: rv, At: time.Now()}
	}
}

// ClaimsSeen counts the claims the recorder saw.
func (r *Recorder) ClaimsSeen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.claims)
}

// Deletions returns the claim deletions seen so far, in order.
func (r *Recorder) Deletions() []ClaimDeletion {
	r.mu.Lock()
	defer r.mu.Unlock()
	deletions := make([]ClaimDeletion, 0, len(r.deletions))
	for _, d := range r.deletions {
		deletions = append(deletions, d)
	}
	slices.SortFunc(deletions, func(a, b ClaimDeletion) int { return cmp.Compare(a.RV, b.RV) })
	return deletions
}
