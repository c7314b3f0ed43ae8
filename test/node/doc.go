// Package node holds the tests that run real pods on a real node
// (harness.StartNode): a kubelet with containerd on this machine, inside a
// network namespace of its own, images built here and imported. They skip,
// saying why, where the machine cannot run pods (not root, no cgroups).
package node
