// Package ledger performs every write to ModelCacheBindings: it finds or
// creates the binding of a decision, adds and removes servers' references,
// adds claims, records what was realized, and moves a binding along its
// lifecycle (Active -> Retiring -> Released, then pruned). The rules it
// applies are pure functions of internal/decision and internal/builder; the
// EmbeddingServer and ModelCacheBinding reconcilers only call it.
//
// The resourceVersion rule, stated once: every status write of a binding is
// an Update carrying the resourceVersion the binding was read at, never a
// patch. A binding therefore changes only from the state its writer saw, and
// in particular it moves to Retiring only from a read that listed zero
// references: a reference added concurrently makes that write a Conflict,
// and the retirement is decided again from a fresh read. References are
// added only to an Active binding, so a Retiring or Released binding is never
// revived; a server whose binding left Active gets a suffixed successor.
//
// Bind reads, then writes. choose decides, from reads alone, which binding
// a server's decision goes to: one it may use, or a new one with its name,
// its source, and its storage (a predecessor's, or its own placed beside a
// serving StatefulSet). choose is a method of reads, which holds
// client.Readers only (TestReadsHoldNoWriter; the SourceFunc it calls
// resolves provenance with reads), so it cannot write. carryOut then writes
// the plan: the predecessor's mark, an update with the resourceVersion it
// was read at (a predecessor changed since is a Conflict, and the next
// reconcile chooses again), and the create. A binding in use that awaits
// the server's first reference is a plan of its own: the reference is
// written first, and the binding is chosen again from what it left.
//
// Other invariants:
//   - A reference is added only after an uncached read (or the answer to a
//     write of the same reconcile, ServerReadLive) confirms the server
//     exists with its finalizer and is not being deleted, so the server's
//     deletion is sure to remove it.
//   - A new binding's first status is written by its creator's reference,
//     whole (phase, reference, drift, readiness, observed generation:
//     firstStatus); the binding controller leaves a binding without a
//     phase to its creator for CreatorGrace, so the two never conflict over
//     it and the binding controller's first look writes nothing. A server
//     that created a PerReplica binding for its first storage writes that
//     reference once the claims are Bound, within FirstReferenceWait
//     (firstReferenceWait), so the first status is also the Ready one; the
//     binding controller leaves such a binding to its creator for as long
//     as the creator exists (awaitsCreator), and a creator that leaves it
//     first writes its status without a reference (abandonAwaiting).
//   - A reference this process removed is not trusted from the cache again:
//     the next Bind of that server re-reads the binding uncached (a quick
//     A -> B -> A revert must not leave A in use without its reference).
//   - Claims are deleted only by a Retiring binding, only when they are the
//     binding's (builder.SharedClaim's owner reference or the binding label
//     of PerReplica claim templates; decision.ClaimOwnership), each with the
//     UID and resourceVersion it was read at, and only once no StatefulSet
//     can create them again and no pod names them (claimUsers: an uncached
//     list of the namespace's pods, as kube-controller-manager's
//     pvc-protection makes); the binding's populate Job is deleted first
//     (stopPopulating). A claim that is not the binding's is reported with
//     a Warning event and left alone.
//   - A binding being deleted that nothing references retires at once, so a
//     namespace or `kubectl delete mcb` is not held for retainFor.
//   - Drift is reported as a condition and an event; it never deletes data.
//   - Shards (Options.Selector, Flux's --watch-label-selector): a binding
//     the selector does not match is another shard's and is never written,
//     even when read uncached; a server uses only bindings of its own
//     shard (decision.SameShard), and a binding drops the reference of a
//     server that moved to another shard as it drops a deleted server's.
//   - Every transition that touches data emits one Event on the binding
//     (Created, Retiring, ClaimDeleted per claim, Released, Superseded,
//     Pruned), with the reason of the binding's Ready condition.
//
// # Lifetime is not storage
//
// A change of retainFor alone moves no data (DESIGN §10). The storage part of
// a decision is the decision without retainFor (decision.SameStorage). When a
// server's new decision has no binding yet and differs only in retainFor from
// the binding its children use (status.cacheBinding), and that binding is
// Active and referenced by this server alone (decision.Supersedable), the new
// binding succeeds it, in writes that each hold on their own:
//
//  1. The predecessor is marked: status.supersededBy names the successor,
//     written with the resourceVersion it was read at. From then on it is
//     never Usable and gains no reference, so nobody else comes to use the
//     storage being handed over.
//  2. The successor is created: its own decision and source (the new
//     commit), spec.supersedes, and the names the workload already carries
//     for the storage, spec.resources.storageName (the pods' and claims'
//     cache-binding label, the Shared claim's name) and claimTemplateName,
//     with every claim the predecessor lists. In a chain they are the
//     root's. The StatefulSet built from them is the one running: no
//     replica is replaced, nothing is downloaded.
//  3. The server references the successor, which also records what its
//     predecessor realized, so the server keeps its pinned commit.
//  4. When the server leaves the predecessor, it is superseded instead of
//     left: its holder (the successor, or the first of that one's
//     successors not Released) lists its claims and takes the controller
//     reference of the claims it controls (a Released record is pruned by
//     the history limit, and the garbage collector would delete what it
//     still controls); then it is Released with reason Superseded, an
//     Active -> Released move the CRD allows only with supersededBy set,
//     and deletes nothing. It never enters Retiring.
//
// The rule that keeps data safe across a crash between any two writes: the
// bindings of one storage form a chain in which every binding but the last
// is marked, and a claim of the storage is deleted only by the last. A marked
// binding that goes idle past its retainFor (its server deleted before it
// was left) is superseded by its holder instead of retiring; only when the
// successor it names was never created does it retire as any other, and
// step 1 is then taken again, for the same or a new name, by the next
// reconcile. A successor does not retire while the binding it superseded is
// still Active. A PerReplica successor owns the claims labelled with its
// storage name (decision.ClaimOwnership); a Shared one, those it controls.
//
// Otherwise (another server references the binding, a size, class, mode or
// revision change) the new binding gets storage of its own, as before.
// Bindings made before these fields keep their own names: an upgrade
// replaces nothing.
//
// # A larger size grows in place
//
// A new decision that differs from the binding the server uses only in a
// larger size (and perhaps retainFor; decision.GrowsInPlace) supersedes it
// as a retainFor change does, when the server is its only user and its
// StorageClass allows volume expansion (classExpands): the successor takes
// over the claims and the names the StatefulSet carries for them, and
// ExpandClaims raises each Bound claim's request to the new size. The
// StatefulSet keeps its claim template (immutable; the controller keeps the
// live one under the same name), so its pods are not restarted; a claim it
// makes later from that template is expanded the same way. A smaller size,
// or a class that does not expand, rolls onto new volumes as below.
//
// # A new revision on the same claims
//
// A PerReplica decision that differs in the model's revision (and perhaps
// retainFor and a larger size; decision.RevisesInPlace) supersedes the
// binding the same way when the server's pods may be replaced one at a
// time (decision.InPlaceRollAllowed: two replicas or more, a budget that
// lets one be unavailable) and its claims have room for another copy of
// the realized model: the free and reclaimable bytes their populators
// reported, or without those twice the model within the size
// (decision.RoomForAnotherRevision). Its own resolve Job records its commit (it
// inherits no realized commit of another revision), and the StatefulSet's
// rolling update replaces each pod on its own claim, where the populator
// prunes revisions older than the one the claim served and fetches only
// the blobs the claim lacks. Otherwise a revision rolls onto
// new storage as below.
//
// # Storage changes roll
//
// New storage means new pods: claim templates cannot change in place, and a
// pod's volumes are fixed when it starts. So a binding of new storage is
// served by a StatefulSet of its own, started beside the one that serves:
//
//   - A new PerReplica binding made while a StatefulSet under the server's
//     name exists records spec.resources.statefulSetName
//     (decision.RolloutStatefulSetName: the server's name and six hex digits
//     of the storage name), and lists its claims under it. With none it
//     records nothing and means the server's name, as every binding made
//     before this rule does. A successor inherits its predecessor's.
//   - The server's reconcile runs the new StatefulSet and the old ones side
//     by side, both selected by its Services and disruption budget, and
//     moves the replicas over by decision.PlanRollout: surge first, an old
//     pod goes only once a new one is ready in its place, so the server's
//     ready pods never drop below its replicas (at most the budget's
//     maxUnavailable new pods start at a time, at least one).
//   - The server references the new binding at once (status.cacheBinding
//     names it) and leaves an old one only when no StatefulSet of the
//     server mounts its storage and no pod of the server carries its
//     cache-binding label: the old binding's retainFor starts then, and it
//     retires as any other.
//   - A storage change made while another rolls gets its StatefulSet in
//     turn; the half-filled one drains with the oldest, those with fewer
//     ready pods first. The newest decision wins; no rollout is left
//     half-finished, since every step is derived again from what the
//     StatefulSets show.
package ledger
