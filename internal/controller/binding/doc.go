// Package binding runs the ModelCacheBinding reconciler: it moves each
// binding along its lifecycle (idle bindings retire after retainFor,
// Retiring bindings release their claims, old Released records are pruned)
// and maps the events of claims, StorageClasses, servers and successor
// bindings to the bindings they concern.
//
// Every write to a binding or its claims goes through the shared
// ledger.Ledger; this package only decides when to call it. It must not
// touch servers or their StatefulSets.
package binding
