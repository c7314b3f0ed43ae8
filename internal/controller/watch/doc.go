// Package watch decides what this controller process lists, watches and
// caches, and under which leader lease: the shard selector of Flux's
// --watch-label-selector, the informer cache's options (owned kinds by
// label, pods trimmed, Secrets never cached), the client's options (strict
// field validation) and the lease names.
//
// It owns the shape of the manager's cache and client. It must not
// reconcile or write anything.
package watch
