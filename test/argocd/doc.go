// Package argocd runs the GitOps end-to-end tests against real Argo CD
// (tier 4, beside test/gitops's Flux): the local kwok cluster and embedops
// as in test/gitops, Argo CD v2.14's repo-server and application-controller
// from ./bin (test/harness StartArgoCD) with embedops' health check
// installed as the README tells users (config/argocd), and a git server on
// loopback that the tests push commits to. It is a package of its own so
// that Argo CD's start and its CRDs (v2.14's, not the v3 ones the
// provenance tests read) stay out of the Flux tests.
package argocd
