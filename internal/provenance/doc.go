// Package provenance finds the git revision of the manifest behind an
// object: declared by annotation, from the Flux Kustomization that applied
// it, or from the Argo CD Application that synced it (DESIGN §5).
//
// The parsers here are pure and fuzzed: revisions in Flux RFC-0005 form
// (`<ref>@sha1:<hex>`, `sha1:<hex>`), the legacy `<ref>/<hex>` form and bare
// shas; Argo CD tracking ids in `<app>` and `<namespace>_<app>` forms.
package provenance
