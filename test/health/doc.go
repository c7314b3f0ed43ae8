// Package health tests the install and GitOps manifests under config/ and
// gitops/: the Argo CD health Lua for EmbeddingServer, run with the Lua
// interpreter Argo CD embeds against Argo CD-style test cases; the argocd-cm patch, which must inline exactly those scripts and, as the
// config/argocd Component or merged with kubectl, keep every other key of
// the user's argocd-cm; the
// Flux healthCheckExprs, compiled and evaluated with CEL; the kustomize
// renderings of config/default and config/flux, including
// the controller's --populator-image following its image; and the GitOps
// layouts in gitops/flux and gitops/argocd and their Helm variants
// (gitops/flux-helm, gitops/argocd-helm): their order (dependsOn, sync
// waves), options, and that every path they deploy renders, a chart with
// the HelmRelease's or the Application's values into what config/default
// installs.
//
// The package holds tests only. `go test ./test/health -update` rewrites
// config/argocd/argocd-cm.yaml from the health.lua files.
package health
