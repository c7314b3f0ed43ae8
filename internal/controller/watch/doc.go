// Package watch decides what this controller process lists, watches and
// caches, and under which leader lease: the shard selector of Flux's
// --watch-label-selector, the informer cache's options (owned kinds by
// label, pods trimmed, Secrets never cached) and the lease names.
//
// It owns the shape of the manager's cache. It must not reconcile or write
// anything.
package watch
