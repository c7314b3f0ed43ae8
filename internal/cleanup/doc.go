// Package cleanup is the uninstall step behind `embedops cleanup`: with no
// controller holding the leader lease, it deletes every ModelCacheBinding
// with its finalizer removed, orphaning (never deleting) the claims they
// own, and removes the server finalizer, so that deleting the CRDs or
// namespaces afterwards cannot hang.
//
// It owns only that one pass. It must not run while a controller holds the
// lease unless forced (ErrControllerRunning), and must never delete a claim.
package cleanup
