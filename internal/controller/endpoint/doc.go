// Package endpoint asks a running TEI server what it serves: the /info client
// of the endpoint check, the --endpoint-check modes, and the NetworkPolicy
// peer that admits the controller's own pods to a server's HTTP port.
//
// It owns the HTTP exchange with TEI and the parsing of its answer. It must
// not read or write Kubernetes objects: the server reconciler decides when
// to ask and what a mismatch means.
package endpoint
