// Package diagnose tells why a server's pods are not ready, from the pods'
// own status as the kubelet and kube-scheduler report it: an image pull,
// a crash, an out-of-memory kill, an unschedulable pod, or a pod that waits
// only for its claims to bind.
//
// It owns the reading of pod status into a Ready=False reason and message.
// It is pure: it must not read or write the API server, and it must not
// decide what a diagnosis does to a server (the server reconciler's progress
// rules do).
package diagnose
