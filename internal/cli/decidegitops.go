package cli

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/provenance"
)

// renderGitOps renders the servers a Flux Kustomization or an Argo CD
// Application read from a file applies, from a commit of a local
// repository, exactly as the audit renders them. It returns the YAML
// stream and the namespace of servers that name none.
func renderGitOps(ctx context.Context, opts decideOptions) ([]byte, string, error) {
	file := opts.kustomization
	if file == "" {
		file = opts.application
	}
	data, err := readFile(file)
	if err != nil {
		return nil, "", err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, "", fmt.Errorf("%s: %w", file, err)
	}
	repo, err := audit.OpenRepository(ctx, audit.RepositoryOptions{Path: opts.repo})
	if err != nil {
		return nil, "", err
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(opts.revision))
	if err != nil {
		return nil, "", fmt.Errorf("resolving %s in %s: %w", opts.revision, opts.repo, err)
	}
	source, err := previewSource(obj, opts, hash.String())
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", file, err)
	}
	resources, namespace, err := audit.Render(repo, hash.String(), source)
	if err != nil {
		return nil, "", fmt.Errorf("rendering %s at %s: %w", file, hash.String()[:12], err)
	}
	if namespace == "" {
		namespace = opts.namespace
	}
	return resources, namespace, nil
}

// previewSource is the source the object would record at commit.
func previewSource(obj *unstructured.Unstructured, opts decideOptions, commit string) (embedopsv1.DecisionSource, error) {
	if opts.kustomization != "" {
		return provenance.FluxPreview(obj)
	}
	return provenance.ArgoPreview(obj, commit)
}
