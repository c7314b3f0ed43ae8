// Package gitops runs the GitOps end-to-end test (tier 4): the local kwok
// cluster and embedops, as in test/e2e, plus Flux's real source-controller
// and kustomize-controller from ./bin, reconciling a git repository that
// the test serves on loopback and pushes commits to, or an OCI artifact
// built from such a commit, pushed to a registry the test serves on
// loopback (go-containerregistry's pkg/registry); and Flux's
// helm-controller, which installs and uninstalls charts/embedops from such
// a repository with gitops/flux-helm's HelmRelease.
package gitops
