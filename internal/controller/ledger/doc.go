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
// Other invariants:
//   - A reference is added only after an uncached read confirms the server
//     exists with its finalizer and is not being deleted, so the server's
//     deletion is sure to remove it.
//   - A reference this process removed is not trusted from the cache again:
//     the next Bind of that server re-reads the binding uncached (a quick
//     A -> B -> A revert must not leave A in use without its reference).
//   - Claims are deleted only by a Retiring binding, only when they are the
//     binding's (builder.SharedClaim's owner reference or the binding label
//     of PerReplica claim templates; decision.ClaimOwnership), each with the
//     UID and resourceVersion it was read at. A claim that is not the
//     binding's is reported with a Warning event and left alone.
//   - A binding being deleted that nothing references retires at once, so a
//     namespace or `kubectl delete mcb` is not held for retainFor.
//   - Drift is reported as a condition and an event; it never deletes data.
//   - Every transition that touches data emits one Event on the binding
//     (Created, Retiring, ClaimDeleted per claim, Released, Pruned), with
//     the reason of the binding's Ready condition.
package ledger
