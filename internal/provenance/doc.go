// Package provenance finds the git revision of the manifest behind an
// object: from the Flux Kustomization that applied it, from the Argo CD
// Application that synced it, or declared by annotation (DESIGN §5). A
// tool's record of a git commit wins over the annotation, which only fills
// in where no tool knows the commit (an OCI artifact, an object applied by
// hand); a declared revision that differs is reported, not recorded.
//
// The parsers here are pure and fuzzed: revisions in Flux RFC-0005 form
// (`<ref>@sha1:<hex>`, `sha1:<hex>`), the legacy `<ref>/<hex>` form and bare
// shas; Argo CD tracking ids in `<app>` and `<namespace>_<app>` forms.
package provenance
