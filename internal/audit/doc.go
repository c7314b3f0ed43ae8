// Package audit re-derives a ModelCacheBinding's decision from git: it opens
// the repository the binding's source names (a local path or a cached bare
// clone), renders the recorded path at the recorded commit with kustomize,
// finds the binding's EmbeddingServer, recomputes the decision with
// internal/decision, and reports Verified, Mismatch (with the fields that
// differ) or Unverifiable (with why). For a verified binding it walks
// first-parent history back to the origin commit: the oldest commit of the
// unbroken run, ending at the recorded one, that renders the same digest.
//
// Invariants:
//   - No output and no clock: results are values (ready for a table, JSON or
//     YAML) and progress is a callback; the caller prints.
//   - Renders are hermetic: kustomize reads a commit's tree, copied into
//     memory as it is read, never the work tree or the local disk. A path
//     without a kustomization is built as kustomize-controller builds it,
//     from a kustomization generated over its manifests; files may be loaded
//     from anywhere in the repository; plugins beyond the built-in ones are
//     off. Remote bases are not supported (kustomize tries to clone them and
//     the build fails). Settings of the Flux Kustomization or Argo CD
//     Application itself (targetNamespace, patches, substitutions) are not
//     applied: servers without a namespace take the binding's.
//   - A build is reused, never repeated, for any commit whose tree answers
//     every read the build made (file contents, directory listings,
//     existence checks) the same way, so walking a long history builds only
//     where the rendered inputs changed.
//   - A binding is first checked against itself: a key or digest that its
//     own fields do not give is a Mismatch even when nothing can be rendered.
//   - Only SHA-1 repositories are read.
package audit
