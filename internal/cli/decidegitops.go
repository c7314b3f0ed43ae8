package cli

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/provenance"
)

// gitOpsObject is a Flux Kustomization or an Argo CD Application read from
// a file, whose servers are rendered from a repository.
type gitOpsObject struct {
	file          string
	object        *unstructured.Unstructured
	kustomization bool
}

// readGitOpsObject reads the Kustomization (when kustomization is set) or
// the Application file.
func readGitOpsObject(kustomization, application string) (*gitOpsObject, error) {
	file := kustomization
	if file == "" {
		file = application
	}
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &gitOpsObject{file: file, object: obj, kustomization: kustomization != ""}, nil
}

// render renders the servers the object applies from commit of repo,
// exactly as the audit renders them. It returns the YAML stream and the
// namespace of servers that name none ("" when the object sets none).
func (o *gitOpsObject) render(repo *git.Repository, commit string) ([]byte, string, error) {
	source, err := o.previewSource(commit)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", o.file, err)
	}
	resources, namespace, err := audit.Render(repo, commit, source)
	if err != nil {
		return nil, "", fmt.Errorf("rendering %s at %s: %w", o.file, commit[:12], err)
	}
	return resources, namespace, nil
}

// previewSource is the source the object would record at commit.
func (o *gitOpsObject) previewSource(commit string) (embedopsv1.DecisionSource, error) {
	if o.kustomization {
		return provenance.FluxPreview(o.object)
	}
	return provenance.ArgoPreview(o.object, commit)
}

// resolveCommit is the commit a revision (commit, branch or tag) of a
// repository opened with repos names.
func resolveCommit(ctx context.Context, repo *git.Repository, repos audit.RepositoryOptions, revision string) (string, error) {
	commit, err := audit.ResolveRevision(ctx, repo, repos, revision)
	if err != nil {
		return "", fmt.Errorf("resolving %s in %s: %w", revision, repositoryName(repos), err)
	}
	return commit, nil
}

// repositoryName is the local path or the URL, fit to print.
func repositoryName(repos audit.RepositoryOptions) string {
	if repos.Path != "" {
		return repos.Path
	}
	return audit.DisplayURL(repos.URL)
}

// renderGitOps renders the servers a Flux Kustomization or an Argo CD
// Application read from a file applies, from a commit of a local
// repository, exactly as the audit renders them. It returns the YAML
// stream and the namespace of servers that name none.
func renderGitOps(ctx context.Context, opts decideOptions) ([]byte, string, error) {
	obj, err := readGitOpsObject(opts.kustomization, opts.application)
	if err != nil {
		return nil, "", err
	}
	repos := audit.RepositoryOptions{Path: opts.repo}
	repo, err := audit.OpenRepository(ctx, repos)
	if err != nil {
		return nil, "", err
	}
	commit, err := resolveCommit(ctx, repo, repos, opts.revision)
	if err != nil {
		return nil, "", err
	}
	resources, namespace, err := obj.render(repo, commit)
	if err != nil {
		return nil, "", err
	}
	if namespace == "" {
		namespace = opts.namespace
	}
	return resources, namespace, nil
}
