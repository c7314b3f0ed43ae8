// Package audit re-derives a ModelCacheBinding's decision from git: it opens
// the repository the binding's source names (a local path or a cached bare
// clone), renders the recorded path at the recorded commit with kustomize,
// finds the binding's EmbeddingServer, recomputes the decision with
// internal/decision, and reports Verified, Mismatch (with the fields that
// differ) or Unverifiable (with why). For a verified binding it walks
// first-parent history back to the origin commit: the oldest commit of the
// unbroken run, ending at the recorded one, that renders the same digest;
// and on, while the decisions share storage, to the storage origin commit,
// which a change of retainFor alone does not move, nor, for a binding that
// took its storage over, a growth or revision handed over in place.
//
// Invariants:
//   - No output and no clock: results are values (ready for a table, JSON or
//     YAML) and progress is a callback; the caller prints.
//   - Renders are hermetic: kustomize reads a commit's tree, copied into
//     memory as it is read, never the work tree (the Flux generator and
//     Helm's value files read a temporary copy of what they need). A path
//     without a kustomization is built as kustomize-controller builds it,
//     from a kustomization generated over its manifests; files may be loaded
//     from anywhere in the repository; plugins beyond the built-in ones are
//     off. Remote bases are not supported (kustomize tries to clone them and
//     the build fails).
//   - A binding that records its GitOps object's settings (spec.source.render)
//     is rendered as that tool renders: a Flux Kustomization with
//     fluxcd/pkg/kustomize (generator, build, inline post-build substitution,
//     commonMetadata); an Argo CD source as a directory (recurse,
//     include/exclude), a kustomization with Argo's overrides, or a Helm chart
//     with the Helm SDK, `$ref` value files read from the ref source's
//     recorded commit. What cannot be reproduced (substitution from a
//     ConfigMap or Secret, an unknown setting, a plugin, jsonnet, a chart
//     repository) makes the binding Unverifiable, naming it; nothing is
//     guessed. Without recorded settings, servers without a namespace take
//     the binding's.
//   - A source applied from an OCI artifact (spec.source.artifact) is
//     rendered from the git commit the artifact records as its origin, the
//     path taken from the origin repository's root; whatever stops that
//     makes the binding Unverifiable, naming the artifact's digest.
//   - A GitRepository's includes are laid out as source-controller lays out
//     its artifact: each included repository, cloned, at the recorded
//     included revision, its fromPath placed at toPath, in a tree written
//     to memory over the repositories' objects (never into a clone). The
//     origin search lays the same included revisions into every commit it
//     walks. With recurseSubmodules, each submodule .gitmodules names is
//     cloned and its tree at the gitlink's commit placed at its path (and
//     its own, ten levels down, as go-git clones for source-controller).
//   - A build is reused, never repeated, for any commit whose tree answers
//     every read the build made (file contents, directory listings,
//     existence checks) the same way, so walking a long history builds only
//     where the rendered inputs changed.
//   - A binding is first checked against itself: a key or digest that its
//     own fields do not give is a Mismatch even when nothing can be rendered.
//   - Only SHA-1 repositories are read.
//   - Clones authenticate with Credentials: given ones (flags, environment)
//     over those a Lookup finds as the GitOps tool has them. Their values
//     stay in memory, never in a result, an error or a file; SSH host keys
//     are always checked against known_hosts, and HTTPS certificates
//     against the system's CAs and those the tool keeps for the server.
package audit
