package ledger

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller/writes"
)

// DefaultHistoryLimit is how many Released bindings are kept per server.
const DefaultHistoryLimit = 10

// EventRecorder emits Kubernetes events; fluxcd/pkg/runtime/events.Recorder
// is one.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Options configure a Ledger.
type Options struct {
	// HistoryLimit is how many Released bindings are kept per server; 0
	// means DefaultHistoryLimit.
	HistoryLimit int
	// ReleaseInterval is how often a Retiring binding looks at its claims;
	// 0 means DefaultReleaseInterval.
	ReleaseInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ShardKeys are the labels that place a server in a shard (the keys the
	// watch label selector names, and embedopsv1.ShardLabel): a binding
	// copies them from the server that creates it, and a server uses only
	// bindings that carry the same, so no shard writes another's binding.
	ShardKeys []string
	// Selector is the watch label selector (Flux's --watch-label-selector);
	// nil selects everything. A binding it does not select is another
	// shard's: the ledger never reads one uncached into a write, so it
	// writes only the bindings of its own shard.
	Selector labels.Selector
	// FirstReferenceWait is how long a new server may leave the first
	// reference of the binding it created unwritten while the binding's
	// claims bind (firstReferenceWait); 0 means DefaultFirstReferenceWait,
	// a negative value writes it at once.
	FirstReferenceWait time.Duration
}

// Ledger writes ModelCacheBindings; see the package documentation for the
// rules every write follows. It is safe for concurrent use.
type Ledger struct {
	client          client.Client
	apiReader       client.Reader
	events          EventRecorder
	historyLimit    int
	releaseInterval time.Duration
	firstRefWait    time.Duration
	now             func() time.Time
	// reads are the reads choose decides with; the Ledger's own client
	// reads the same cache, and writes.
	reads
	// left holds the (binding UID, server UID) pairs whose reference this
	// process removed: the cache may still show such a reference.
	left sync.Map
	// held holds the references this process added and has not removed:
	// the cache may not show them yet.
	held heldReferences
	// listed holds the namespaces whose bindings this process listed from
	// the API server (learnNamespace).
	listed sync.Map
	// written is the resourceVersion of this process's last write of each
	// binding, or of the uncached read learnNamespace made.
	written writes.Versions
}

// New returns a Ledger writing with c (whose reads are cached) and reading
// uncached with apiReader where a race needs it.
func New(c client.Client, apiReader client.Reader, recorder EventRecorder, opts Options) *Ledger {
	l := &Ledger{client: c, apiReader: apiReader, events: recorder, historyLimit: opts.HistoryLimit, releaseInterval: opts.ReleaseInterval, now: opts.Now,
		reads:        reads{cache: c, live: apiReader, shardKeys: opts.ShardKeys, selector: opts.Selector},
		firstRefWait: firstReferenceWaitOf(opts.FirstReferenceWait)}
	if l.selector == nil {
		l.selector = labels.Everything()
	}
	if l.historyLimit <= 0 {
		l.historyLimit = DefaultHistoryLimit
	}
	if l.releaseInterval <= 0 {
		l.releaseInterval = DefaultReleaseInterval
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// leftKey identifies a reference this process removed.
type leftKey struct {
	binding, server types.UID
}

// updateStatus writes the binding's status with the resourceVersion it was
// read at (the package's one rule): a concurrent change makes it a
// Conflict, retried from a fresh read.
func (l *Ledger) updateStatus(ctx context.Context, binding *embedopsv1.ModelCacheBinding) error {
	if err := l.client.Status().Update(ctx, binding, client.FieldOwner(embedopsv1.StatusFieldManager)); err != nil {
		return fmt.Errorf("updating the status of binding %s: %w", binding.Name, err)
	}
	l.written.Record(client.ObjectKeyFromObject(binding), binding.ResourceVersion)
	return nil
}

// ReferenceIndex is the cache index of bindings by the UIDs of the servers
// they reference; SetupReconcilers registers ReferencedServers under it.
const ReferenceIndex = "status.requestReferences.uid"

// ReferencedServers is ReferenceIndex's function: the UIDs of the servers
// a binding references.
func ReferencedServers(obj client.Object) []string {
	binding, ok := obj.(*embedopsv1.ModelCacheBinding)
	if !ok {
		return nil
	}
	uids := make([]string, 0, len(binding.Status.RequestReferences))
	for _, ref := range binding.Status.RequestReferences {
		uids = append(uids, string(ref.UID))
	}
	return uids
}

// heldReferences are, per server UID, the names of the bindings this process
// referenced for it and has not seen it leave. It is safe for concurrent
// use.
type heldReferences struct {
	mu       sync.Mutex
	bindings map[types.UID]map[string]struct{}
}

// add remembers that server references binding.
func (h *heldReferences) add(server types.UID, binding string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bindings == nil {
		h.bindings = map[types.UID]map[string]struct{}{}
	}
	if h.bindings[server] == nil {
		h.bindings[server] = map[string]struct{}{}
	}
	h.bindings[server][binding] = struct{}{}
}

// drop forgets that server references binding.
func (h *heldReferences) drop(server types.UID, binding string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.bindings[server], binding)
	if len(h.bindings[server]) == 0 {
		delete(h.bindings, server)
	}
}

// forget forgets every reference of server.
func (h *heldReferences) forget(server types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.bindings, server)
}

// names returns the bindings server references.
func (h *heldReferences) names(server types.UID) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Collect(maps.Keys(h.bindings[server]))
}
