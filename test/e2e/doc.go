// Package e2e runs the controller against the local kwok cluster (tier 3):
// real kube-controller-manager and scheduler, simulated pods and kubelets,
// dynamically provisioned claims.
package e2e
