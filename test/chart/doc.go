// Package chart renders the Helm chart in charts/embedops with the Helm SDK
// and config/default with kustomize, as objects that compare equal when
// the chart installs what config/default installs. Its tests check that
// they do, with default and other values, that the chart lints clean and
// that its values schema refuses contradictory values. test/health renders
// the chart through it for the GitOps layouts' checks, test/gitops to know
// what helm-controller must install.
//
// The chart's generated files (the CRDs in templates/crds/, the manager role's rules
// and the alert rules in files/) are written from config/ by
// `go test ./test/chart -run TestGeneratedFiles -update`, which
// `make manifests` runs.
package chart
