package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
)

// sourceKind is a kind of GitOps object whose repository URLs tell which
// hosts the cluster fetches from, and where in it the URLs are.
type sourceKind struct {
	gvk schema.GroupVersionKind
	// urls reads the object's repository URLs.
	urls func(obj map[string]any) []string
}

// declaredHostSources are the objects whose hosts a declared repository
// may use: Flux's GitRepository, OCIRepository and HelmRepository
// (spec.url, source-controller api/v1) and Argo CD's Application
// (spec.source.repoURL and spec.sources[].repoURL, argo-cd
// pkg/apis/application/v1alpha1 types.go).
var declaredHostSources = []sourceKind{
	{gvk: schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}, urls: specURL},
	{gvk: schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}, urls: specURL},
	{gvk: schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmRepository"}, urls: specURL},
	{gvk: schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}, urls: applicationRepoURLs},
}

// declaredHosts are the hosts a declared binding's repository may be
// fetched from: those the cluster's Flux sources and Argo CD Applications
// use, read through c (nil: none), and allowed. A kind whose CRD is not
// installed adds nothing; one that cannot be listed is an error in errs,
// and its hosts are left out.
func declaredHosts(ctx context.Context, c client.Reader, allowed []string) (hosts *audit.DeclaredHosts, errs []error) {
	hosts = &audit.DeclaredHosts{Cluster: map[string]string{}, Allowed: allowed}
	if c == nil {
		return hosts, nil
	}
	for _, kind := range declaredHostSources {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kind.gvk.GroupVersion().WithKind(kind.gvk.Kind + "List"))
		err := c.List(ctx, list)
		switch {
		case meta.IsNoMatchError(err):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("cannot list %ss: %s", kind.gvk.Kind, describe(err)))
			continue
		}
		for _, item := range list.Items {
			for _, url := range kind.urls(item.Object) {
				if host := audit.RepositoryHost(url); host != "" && hosts.Cluster[host] == "" {
					hosts.Cluster[host] = fmt.Sprintf("%s %s/%s", kind.gvk.Kind, item.GetNamespace(), item.GetName())
				}
			}
		}
	}
	return hosts, errs
}

// anyDeclared reports whether any binding's source is Declared, the only
// ones the host policy applies to.
func anyDeclared(bindings []embedopsv1.ModelCacheBinding) bool {
	for i := range bindings {
		if bindings[i].Spec.Source.Method == embedopsv1.SourceDeclared {
			return true
		}
	}
	return false
}

// specURL reads spec.url.
func specURL(obj map[string]any) []string {
	url, _, _ := unstructured.NestedString(obj, "spec", "url")
	return []string{url}
}

// applicationRepoURLs reads an Application's spec.source.repoURL and each
// spec.sources[].repoURL.
func applicationRepoURLs(obj map[string]any) []string {
	url, _, _ := unstructured.NestedString(obj, "spec", "source", "repoURL")
	urls := []string{url}
	sources, _, _ := unstructured.NestedSlice(obj, "spec", "sources")
	for _, source := range sources {
		if fields, ok := source.(map[string]any); ok {
			if url, ok := fields["repoURL"].(string); ok {
				urls = append(urls, url)
			}
		}
	}
	return urls
}

// allowedHostsFlag checks the --allow-declared-host values: host names,
// optionally with a port, not URLs with paths.
func allowedHostsFlag(values []string) error {
	for _, value := range values {
		if strings.TrimSpace(value) == "" || strings.Contains(value, "/") {
			return usageErrorf("--allow-declared-host %q: give a host name, such as git.example.com", value)
		}
	}
	return nil
}

// hostsForDeclared is the host policy for the audit's Declared bindings:
// nil when nothing is cloned for them (none, or --repo); the cluster's
// hosts are read only then. What cannot be listed is a warning on out.
func hostsForDeclared(ctx context.Context, out io.Writer, c client.Reader, repos audit.RepositoryOptions,
	bindings []embedopsv1.ModelCacheBinding, allowed []string) *audit.DeclaredHosts {
	if repos.Path != "" || !anyDeclared(bindings) {
		return nil
	}
	hosts, errs := declaredHosts(ctx, c, allowed)
	for _, err := range errs {
		fmt.Fprintf(out, "warning: %v; its hosts are not allowed for Declared bindings\n", err)
	}
	return hosts
}
