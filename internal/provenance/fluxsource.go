package provenance

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// The OpenContainers annotations `flux push artifact` writes on an artifact
// (fluxcd/pkg oci v0.68.1 constants.go and meta.go, Metadata.ToAnnotations)
// and source-controller copies into the OCIRepository's
// status.artifact.metadata (source-controller v1.9.6
// internal/controller/ocirepository_controller.go: metadata.Metadata =
// manifest.Annotations).
const (
	OCISourceAnnotation   = "org.opencontainers.image.source"
	OCIRevisionAnnotation = "org.opencontainers.image.revision"
)

// ociSource records the artifact a Kustomization applies from an
// OCIRepository and the git commit it was built from. kustomize-controller
// takes the origin revision from the artifact's metadata at the start of
// each reconcile (v1.9.6 internal/controller/kustomization_controller.go,
// getOriginRevision) and keeps the applied one in
// status.lastAppliedOriginRevision; the artifact's metadata is read when it
// is the one being applied, that status field when the revision being
// applied is the one last applied. An artifact with no origin is recorded
// with its digest, Reason NotGitSource.
func ociSource(source embedopsv1.DecisionSource, ks, repo *unstructured.Unstructured, revision, where string) Resolution {
	source.Revision = revision
	rev, err := ParseRevision(revision)
	if err != nil {
		return Resolution{Source: source, Reason: embedopsv1.InvalidRevisionReason, Message: fmt.Sprintf("%s: %v", where, err)}
	}
	if rev.Algorithm == "sha256" {
		source.Artifact = "sha256:" + rev.Hex
	}
	artifact := fmt.Sprintf("%s: artifact %s", where, revision)
	origin, repository := ociOrigin(ks, repo, revision)
	switch {
	case origin == "":
		return notGit(source, fmt.Sprintf("%s cannot be traced to git: it has no %s annotation", artifact, OCIRevisionAnnotation))
	case repository == "":
		return notGit(source, fmt.Sprintf("%s cannot be traced to git: it has no %s annotation", artifact, OCISourceAnnotation))
	}
	originRev, err := ParseRevision(origin)
	if err != nil || originRev.Commit() == "" {
		return notGit(source, fmt.Sprintf("%s cannot be traced to git: its origin revision %q names no git commit", artifact, origin))
	}
	source.Repository, source.Commit = repository, originRev.Commit()
	return Resolution{Source: source}
}

// ociOrigin is the origin revision and source repository of the artifact
// with this revision, or "" for what is not known.
func ociOrigin(ks, repo *unstructured.Unstructured, revision string) (origin, repository string) {
	if repo == nil {
		return "", ""
	}
	current, _, _ := unstructured.NestedString(repo.Object, "status", "artifact", "revision")
	metadata, _, _ := unstructured.NestedStringMap(repo.Object, "status", "artifact", "metadata")
	// An artifact is pushed from one repository: the current artifact's
	// source stands for an earlier one's. A wrong guess makes the audit
	// Unverifiable (no such commit), never Verified.
	repository = metadata[OCISourceAnnotation]
	if current == revision {
		return metadata[OCIRevisionAnnotation], repository
	}
	applied, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision")
	if applied == revision {
		origin, _, _ = unstructured.NestedString(ks.Object, "status", "lastAppliedOriginRevision")
	}
	return origin, repository
}

// notGit records a source that names no git commit.
func notGit(source embedopsv1.DecisionSource, message string) Resolution {
	source.Commit, source.Repository = "", ""
	return Resolution{Source: source, Reason: embedopsv1.NotGitSourceReason, Message: message}
}

// gitSourceInputs records what a GitRepository adds to its artifact beyond
// the commit: each include, with the included GitRepository's URL and the
// revision status.includedArtifacts lists at the include's index
// (source-controller v1.9.6 internal/controller/gitrepository_controller.go,
// reconcileInclude: the artifact set's index matches spec.include's), and
// recurseSubmodules. "" when it adds nothing.
func (r *Resolver) gitSourceInputs(ctx context.Context, repo *unstructured.Unstructured) (string, error) {
	var inputs embedopsv1.GitSourceInputs
	inputs.RecurseSubmodules, _, _ = unstructured.NestedBool(repo.Object, "spec", "recurseSubmodules")
	includes, _, _ := unstructured.NestedSlice(repo.Object, "spec", "include")
	included, _, _ := unstructured.NestedSlice(repo.Object, "status", "includedArtifacts")
	for i, entry := range includes {
		fields, ok := entry.(map[string]any)
		if !ok {
			continue
		}
		include := embedopsv1.GitInclude{}
		include.Name, _, _ = unstructured.NestedString(fields, "repository", "name")
		include.FromPath, _, _ = unstructured.NestedString(fields, "fromPath")
		include.ToPath, _, _ = unstructured.NestedString(fields, "toPath")
		if include.ToPath == "" {
			include.ToPath = include.Name // GitRepositoryInclude.GetToPath
		}
		if i < len(included) {
			if artifact, ok := included[i].(map[string]any); ok {
				include.Revision, _, _ = unstructured.NestedString(artifact, "revision")
			}
		}
		key := types.NamespacedName{Namespace: repo.GetNamespace(), Name: include.Name}
		if other, found, err := r.getOptional(ctx, sourceGVK("GitRepository"), key); err != nil {
			return "", err
		} else if found {
			include.Repository, _, _ = unstructured.NestedString(other.Object, "spec", "url")
		}
		include.FromPath, include.ToPath = cleanInclude(include.FromPath), cleanInclude(include.ToPath)
		inputs.Include = append(inputs.Include, include)
	}
	if len(inputs.Include) == 0 && !inputs.RecurseSubmodules {
		return "", nil
	}
	data, err := json.Marshal(inputs)
	if err != nil {
		return "", fmt.Errorf("encoding the GitRepository's includes: %w", err)
	}
	return string(data), nil
}

// cleanInclude writes an include path as a slash path relative to the
// artifact's root; "" for the root.
func cleanInclude(p string) string {
	return path.Clean("/" + p)[1:]
}
