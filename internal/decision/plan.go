package decision

import (
	"cmp"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Action is what a change of manifests does to one cache decision.
type Action string

// Actions of a plan, as the ledger takes them when the change is applied.
const (
	// ActionCreate records a decision no server had: new storage, filled
	// by a download.
	ActionCreate Action = "Create"
	// ActionKeep keeps a decision some server already had, and its data.
	ActionKeep Action = "Keep"
	// ActionKeepLifetimeChanged records a decision that differs from the
	// server's in retainFor alone: its successor binding takes over the
	// claims, so the data stays and the server does not roll.
	ActionKeepLifetimeChanged Action = "KeepLifetimeChanged"
	// ActionKeepExpanded records a decision of a larger size: its successor
	// binding takes over the claims and expands them in place.
	ActionKeepExpanded Action = "KeepExpanded"
	// ActionKeepRevised records a decision of a new model revision: its
	// successor binding takes over the claims, the pods roll in place one
	// at a time and fetch only the files the claims lack.
	ActionKeepRevised Action = "KeepRevised"
	// ActionRetire leaves a decision without users: its binding retires and
	// its data is released retainFor later.
	ActionRetire Action = "Retire"
)

// Plan is what a change of manifests does to the cache decisions of the
// servers it renders: one entry per server that has a cache before or
// after, sorted by server.
type Plan struct {
	// Servers are the servers' changes.
	Servers []ServerChange `json:"servers"`
}

// ServerChange is what a change does to one server's caches.
type ServerChange struct {
	// Server is "namespace/name".
	Server string `json:"server"`
	// Rolls reports that the server's pods move to other cache storage:
	// it exists before and after and its storage (claim template or Shared
	// claim) changes. Pods that roll in place (KeepRevised) do not move.
	Rolls bool `json:"rolls"`
	// InPlace reports that the move replaces the pods in place
	// (spec.rollout.maxSurge 0): an old pod stops before its successor
	// starts, which for one replica is an outage.
	InPlace bool `json:"inPlace,omitempty"`
	// Caches are the decisions the server uses after the change (Create,
	// Keep or a successor's Keep action), then the one it leaves when that
	// retires.
	Caches []CacheChange `json:"caches"`
}

// CacheChange is one decision and what the change does to it.
type CacheChange struct {
	// Action is what happens to the decision.
	Action Action `json:"action"`
	// Binding is the base name of the decision's binding (BindingName).
	Binding string `json:"binding"`
	// Identity is what the cache holds and who may share it.
	Identity embedopsv1.CacheIdentity `json:"identity"`
	// Decision is the decision after the change, or the retired one.
	Decision embedopsv1.CacheDecision `json:"decision"`
	// Supersedes is, for a successor (KeepLifetimeChanged, KeepExpanded,
	// KeepRevised), the binding whose claims the decision's binding takes
	// over.
	Supersedes string `json:"supersedes,omitempty"`
	// Condition is, for a successor, what the takeover depends on that the
	// plan does not know (Facts), and what happens otherwise.
	Condition string `json:"condition,omitempty"`
	// PreviousRetainFor is, for a successor, the retainFor before, when it
	// changed.
	PreviousRetainFor *metav1.Duration `json:"previousRetainFor,omitempty"`
	// Download is what the change fills with the model; nil for Retire.
	Download *Download `json:"download,omitempty"`
}

// Download is how much of a model a change downloads into new caches.
type Download struct {
	// Copies is how many caches the change fills: the claims of new
	// PerReplica replicas, or a new Shared claim.
	Copies int32 `json:"copies"`
	// BytesPerCopy is the model's size as status.realized of a binding of
	// the same model and revision records it; nil when none does. For
	// KeepRevised it is at most that: the claims fetch only what they lack.
	BytesPerCopy *int64 `json:"bytesPerCopy,omitempty"`
}

// Bytes is the total download, nil when it is not known.
func (d *Download) Bytes() *int64 {
	switch {
	case d == nil || d.Copies == 0:
		return new(int64(0))
	case d.BytesPerCopy == nil:
		return nil
	default:
		return new(*d.BytesPerCopy * int64(d.Copies))
	}
}

// Retires reports whether any decision of the plan retires.
func (p *Plan) Retires() bool {
	return slices.ContainsFunc(p.Servers, func(s ServerChange) bool {
		return slices.ContainsFunc(s.Caches, func(c CacheChange) bool { return c.Action == ActionRetire })
	})
}

// decided is one server's decision at one side of a change.
type decided struct {
	server   *embedopsv1.EmbeddingServer
	decision *Decision
}

// name is the base name of the decision's binding, "" without a cache.
func (d *decided) name() string {
	if d == nil || d.decision == nil {
		return ""
	}
	return BindingName(d.decision)
}

// side is every server's decision at one side of a change, by server, and
// the servers that use each binding.
type side struct {
	servers map[string]*decided
	users   map[string][]string
}

// NewPlan returns what changing the servers from into to does to their
// caches, as the ledger applies it: a decision some server already has is
// kept; one whose binding may take over the claims of the server's own
// (takeover), when that server was its only user (Supersedable), is its
// successor; any other is created; a decision left without users retires.
// facts are what the plan knows of the cluster. Errors name the server
// whose spec cannot be decided.
func NewPlan(from, to []*embedopsv1.EmbeddingServer, facts Facts) (*Plan, error) {
	before, err := sideOf(from)
	if err != nil {
		return nil, fmt.Errorf("before the change: %w", err)
	}
	after, err := sideOf(to)
	if err != nil {
		return nil, fmt.Errorf("after the change: %w", err)
	}
	keys := serverKeys(before, after)
	successors := successions(before, after, keys, facts)
	superseded := map[string]bool{}
	for _, s := range successors {
		superseded[s.predecessor] = true
	}
	plan := &Plan{Servers: []ServerChange{}}
	created := map[string]bool{}
	for _, key := range keys {
		change := ServerChange{Server: key, Caches: []CacheChange{}}
		old, updated := before.servers[key], after.servers[key]
		if updated.name() != "" {
			change.Caches = append(change.Caches, useOf(before, updated, old, successors, facts.Bindings, created))
		}
		if name := old.name(); name != "" && len(after.users[name]) == 0 && !superseded[name] {
			change.Caches = append(change.Caches, CacheChange{
				Action: ActionRetire, Binding: name, Identity: old.decision.Identity, Decision: old.decision.Decision,
			})
		}
		change.Rolls = old != nil && updated != nil && !sameStorage(old, updated, successors)
		change.InPlace = change.Rolls && ReplacesInPlace(updated.server)
		if len(change.Caches) > 0 || change.Rolls {
			plan.Servers = append(plan.Servers, change)
		}
	}
	return plan, nil
}

// sideOf decides every server.
func sideOf(servers []*embedopsv1.EmbeddingServer) (*side, error) {
	s := &side{servers: map[string]*decided{}, users: map[string][]string{}}
	for _, server := range servers {
		key := server.Namespace + "/" + server.Name
		if _, ok := s.servers[key]; ok {
			return nil, fmt.Errorf("server %s is rendered twice", key)
		}
		d, err := For(server)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", key, err)
		}
		s.servers[key] = &decided{server: server, decision: d}
		if name := s.servers[key].name(); name != "" {
			s.users[name] = append(s.users[name], key)
		}
	}
	return s, nil
}

// serverKeys are the servers of either side, sorted.
func serverKeys(before, after *side) []string {
	var keys []string
	for key := range before.servers {
		keys = append(keys, key)
	}
	for key := range after.servers {
		if _, ok := before.servers[key]; !ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// successions maps the binding of each decision after the change that takes
// over the claims of a binding before it to that takeover: a new decision
// that may succeed its server's old one (takeover), where the server was
// the old binding's only user. keys are the servers of either side, sorted,
// so the first server to reach a new binding wins.
func successions(before, after *side, keys []string, facts Facts) map[string]succeeding {
	successors := map[string]succeeding{}
	for _, key := range keys {
		old, updated := before.servers[key], after.servers[key]
		name, oldName := updated.name(), old.name()
		switch {
		case name == "" || oldName == "" || name == oldName:
			continue
		case len(before.users[name]) > 0:
			// A binding of the new decision exists: the server uses it.
			continue
		case !slices.Equal(before.users[oldName], []string{key}):
			continue
		}
		kind, condition := takeover(old, updated, facts)
		if _, taken := successors[name]; !taken && kind != NoSuccession {
			successors[name] = succeeding{predecessor: oldName, kind: kind, condition: condition}
		}
	}
	return successors
}

// useOf is the decision a server uses after the change and what the change
// does to it. created tracks the decisions already counted as created, so
// a new Shared cache is downloaded once.
func useOf(before *side, updated, old *decided, successors map[string]succeeding, known []embedopsv1.ModelCacheBinding, created map[string]bool) CacheChange {
	name := updated.name()
	d := updated.decision
	change := CacheChange{Binding: name, Identity: d.Identity, Decision: d.Decision}
	s, succeeds := successors[name]
	switch {
	case len(before.users[name]) > 0:
		change.Action = ActionKeep
		change.Download = grown(old, updated, old.name() == name)
	case succeeds && s.kind == RevisionSuccession:
		change.Action, change.Supersedes, change.Condition = ActionKeepRevised, s.predecessor, s.condition
		change.PreviousRetainFor = previousRetainFor(before, s.predecessor, d)
		change.Download = &Download{Copies: copies(updated)}
	case succeeds:
		change.Action, change.Supersedes, change.Condition = successorAction(s.kind), s.predecessor, s.condition
		change.PreviousRetainFor = previousRetainFor(before, s.predecessor, d)
		change.Download = grown(old, updated, old.name() == s.predecessor)
	default:
		change.Action = ActionCreate
		change.Download = &Download{Copies: copies(updated)}
		if created[name] {
			change.Download.Copies = 0
		}
		created[name] = true
	}
	if change.Download != nil && change.Download.Copies > 0 {
		change.Download.BytesPerCopy = RealizedBytes(known, d.Identity)
	}
	return change
}

// previousRetainFor is the retainFor of the binding name before the change,
// nil when it is d's.
func previousRetainFor(before *side, name string, d *Decision) *metav1.Duration {
	users := before.users[name]
	if len(users) == 0 {
		return nil
	}
	previous := before.servers[users[0]].decision.Decision.RetainFor
	if previous == d.Decision.RetainFor {
		return nil
	}
	return &previous
}

// copies is how many caches a new decision fills: one per PerReplica
// replica, one Shared claim, none for an existing claim (its user filled
// it; embedops only verifies it).
func copies(d *decided) int32 {
	if d.decision.Decision.ExistingClaim != "" {
		return 0
	}
	if d.decision.Decision.Mode == embedopsv1.CacheModeShared {
		return 1
	}
	return max(d.server.GetReplicas(), 0)
}

// grown is the download of a kept PerReplica cache the server keeps
// (own): the claims of the replicas it adds. nil when nothing is filled.
func grown(old, updated *decided, own bool) *Download {
	if !own || updated.decision.Decision.Mode != embedopsv1.CacheModePerReplica {
		return nil
	}
	added := updated.server.GetReplicas() - max(old.server.GetReplicas(), 0)
	if added <= 0 {
		return nil
	}
	return &Download{Copies: added}
}

// sameStorage reports whether a server's pods keep their cache storage
// across the change: no cache before and after, the same decision, or a
// decision whose binding took over the old one's claims.
func sameStorage(old, updated *decided, successors map[string]succeeding) bool {
	oldName, name := old.name(), updated.name()
	return oldName == name || (oldName != "" && successors[name].predecessor == oldName)
}

// RealizedBytes is the model size status.realized records in the newest
// of bindings (by creation, then name) that caches identity's model and
// revision; nil when none records one.
func RealizedBytes(bindings []embedopsv1.ModelCacheBinding, identity embedopsv1.CacheIdentity) *int64 {
	var found *embedopsv1.ModelCacheBinding
	for i := range bindings {
		b := &bindings[i]
		if b.Spec.Identity.Model != identity.Model || b.Spec.Identity.Revision != identity.Revision ||
			b.Status.Realized == nil || b.Status.Realized.Bytes == nil {
			continue
		}
		if found == nil || newer(b, found) {
			found = b
		}
	}
	if found == nil {
		return nil
	}
	return new(*found.Status.Realized.Bytes)
}

// newer orders bindings by creation, then by name.
func newer(a, b *embedopsv1.ModelCacheBinding) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return cmp.Compare(a.Name, b.Name) > 0
}
