// Package security holds the security tests, run on the local kwok cluster
// against the controller run as its own process:
//
//   - every pod embedops creates (server pods with the populate init
//     container, Shared populate Jobs) is admitted in a namespace that
//     enforces the restricted Pod Security Standard;
//   - config/rbac gives the controller's ServiceAccount no way to create,
//     change or delete a Secret (SubjectAccessReview);
//   - a HuggingFace token never appears in the controller's logs (at debug
//     level), in events, in the status or spec of servers and bindings, in
//     the children or in metrics;
//   - a pod template that reaches the host or raises privileges, which the
//     API server cannot see into, stalls the server instead of running.
package security
