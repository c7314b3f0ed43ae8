// Package chaos runs embedops against faults on the local kwok cluster:
// kube-apiserver restarted during a rollout, the controller killed with
// SIGKILL at random points of many create/change/delete cycles, and leader
// failover between two controller replicas. After each run it checks the
// cache lifecycle invariants of DESIGN §4 with the functions of this
// package: every server has exactly one Active binding, no claim was deleted
// while a binding still needed it, nothing deleted is held by a finalizer,
// and no decision has two Active bindings.
package chaos
