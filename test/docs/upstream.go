package docs

import (
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// upstreamProgram names a program whose files, functions, fields and keys
// the docs cite beside ours: the house rule is that a rule following an
// upstream program names that program where it cites it, so a name the tree
// lacks is accepted as the program's only in a sentence (or table cell)
// that names the program.
var upstreamProgram = regexp.MustCompile(`(?i)\b(kubernetes|k8s|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl|` +
	`flux|fluxcd|source-controller|kustomize-controller|helm-controller|kustomize|argo cd|gitops-engine|cli-utils|kstatus|` +
	`helm|tei|huggingface_hub|hf-hub|controller-runtime|statfs|coredns|containerd|runc|prometheus|` +
	`external-provisioner|external-snapshotter|snapshot-controller|csi-driver-host-path)\b`)

// upstream tells whether a sentence names an upstream program.
func upstream(sentence string) bool {
	return upstreamProgram.MatchString(sentence)
}

// upstreamValues are values of upstream libraries that the docs name as the
// code meets them and the code matches through a function (apierrors.Is...)
// rather than by value; the compiler checks that each still exists.
var upstreamValues = set{
	// The API server's reason for a create whose name is taken.
	string(metav1.StatusReasonAlreadyExists): true,
}
