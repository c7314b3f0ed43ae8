// Package healthcheck evaluates embedops' GitOps health checks the way the
// tools do: the Argo CD health Lua under config/argocd with gopher-lua and
// the libraries Argo CD opens, and the Flux healthCheckExprs of config/flux
// with the CEL environment and evaluation order of kustomize-controller.
// test/health runs them on the checked-in Argo CD test cases; test/e2e runs
// them on the statuses the controller writes on the local cluster.
package healthcheck
