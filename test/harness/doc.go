// Package harness starts the real control planes the tests run against:
// envtest (kube-apiserver and etcd from ./bin, CRDs from config/crd/bases)
// and, for heavier tiers, the local kwok cluster and GitOps tools, and a
// real node (StartNode: a kubelet with containerd running real pods, every
// component inside a network namespace of its own).
//
// Binaries come from `make tools`; nothing is downloaded at test time. A
// missing binary fails the test run with the command that builds it.
package harness
