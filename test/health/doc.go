// Package health tests the install and GitOps manifests under config/: the
// Argo CD health Lua for EmbeddingServer and ModelCacheBinding, run with the
// Lua interpreter Argo CD embeds against Argo CD-style test cases; the
// argocd-cm snippet, which must inline exactly those scripts; the Flux
// healthCheckExprs, compiled and evaluated with CEL; and the kustomize
// renderings of config/default, config/flux and config/argocd.
//
// The package holds tests only. `go test ./test/health -update` rewrites
// config/argocd/argocd-cm.yaml from the health.lua files.
package health
