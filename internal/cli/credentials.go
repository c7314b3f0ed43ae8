package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
)

// The Flux kinds a binding's Kustomization leads to.
var (
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	gitRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}
)

// clusterCredentials finds a binding's git credentials as the GitOps tool
// that applied it has them: a Flux binding's Kustomization leads to its
// GitRepository and spec.secretRef; an Argo CD binding's repository to
// Argo's repository and repo-creds Secrets, with Argo's SSH known hosts.
// What it cannot read is an error naming the object, never a value.
type clusterCredentials struct {
	client client.Client
	// argoNamespace is where Argo CD keeps its Secrets; empty means the
	// Application's namespace.
	argoNamespace string
	// found keeps each lookup's answer, so bindings of one source read
	// the cluster once.
	found map[string]lookedUp
}

// lookedUp is the answer of one lookup.
type lookedUp struct {
	creds audit.Credentials
	err   error
}

// lookup is an audit.RepositoryOptions.Lookup.
func (c *clusterCredentials) lookup(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (audit.Credentials, error) {
	source := binding.Spec.Source
	if source.ObjectRef == nil {
		return audit.Credentials{}, nil
	}
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%s", source.Method, *source.ObjectRef, source.Repository, c.argoNamespace)
	answer, ok := c.found[key]
	if !ok {
		answer.creds, answer.err = c.read(ctx, source)
		if c.found == nil {
			c.found = map[string]lookedUp{}
		}
		c.found[key] = answer
	}
	return answer.creds, answer.err
}

// read finds the credentials of a source in the cluster.
func (c *clusterCredentials) read(ctx context.Context, source embedopsv1.DecisionSource) (audit.Credentials, error) {
	ref := source.ObjectRef
	switch {
	case source.Method == embedopsv1.SourceFlux && ref.Kind == kustomizationGVK.Kind:
		return c.flux(ctx, ref, source.Repository)
	case source.Method == embedopsv1.SourceArgoCD && ref.Kind == "Application":
		namespace := c.argoNamespace
		if namespace == "" {
			namespace = ref.Namespace
		}
		return c.argo(ctx, namespace, source.Repository)
	}
	return audit.Credentials{}, nil
}

// flux reads the secretRef Secret of the Kustomization's GitRepository,
// when that repository is still the recorded one.
func (c *clusterCredentials) flux(ctx context.Context, ref *embedopsv1.SourceObjectReference, repository string) (audit.Credentials, error) {
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(kustomizationGVK)
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, ks); err != nil {
		return audit.Credentials{}, cannotRead("Kustomization", ref.Namespace, ref.Name, err)
	}
	kind, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "kind")
	name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	namespace, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "namespace")
	if kind != gitRepositoryGVK.Kind || name == "" {
		return audit.Credentials{}, nil
	}
	if namespace == "" {
		namespace = ks.GetNamespace()
	}
	repo := &unstructured.Unstructured{}
	repo.SetGroupVersionKind(gitRepositoryGVK)
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, repo); err != nil {
		return audit.Credentials{}, cannotRead("GitRepository", namespace, name, err)
	}
	url, _, _ := unstructured.NestedString(repo.Object, "spec", "url")
	secretName, _, _ := unstructured.NestedString(repo.Object, "spec", "secretRef", "name")
	if url != repository || secretName == "" {
		return audit.Credentials{}, nil // moved to another repository: its credentials are not this one's
	}
	secret := &corev1.Secret{}
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secretName}, secret); err != nil {
		return audit.Credentials{}, cannotRead("Secret", namespace, secretName, err)
	}
	return audit.FluxCredentials(secret), nil
}

// argo picks Argo CD's Secret for the repository, with Argo's known hosts
// for SSH.
func (c *clusterCredentials) argo(ctx context.Context, namespace, repository string) (audit.Credentials, error) {
	typed, err := labels.NewRequirement(audit.ArgoSecretTypeLabel, selection.In, []string{audit.ArgoRepository, audit.ArgoRepoCreds})
	if err != nil {
		return audit.Credentials{}, err
	}
	var secrets corev1.SecretList
	if err := c.client.List(ctx, &secrets, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*typed)}); err != nil {
		return audit.Credentials{}, fmt.Errorf("cannot list the Secrets labelled %s in namespace %s: %s", audit.ArgoSecretTypeLabel, namespace, describe(err))
	}
	var knownHosts []byte
	hosts := &corev1.ConfigMap{}
	err = c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: audit.ArgoKnownHostsConfigMap}, hosts)
	switch {
	case err == nil:
		knownHosts = []byte(hosts.Data[audit.ArgoKnownHostsKey])
	case apierrors.IsNotFound(err):
		err = nil // the user's known_hosts files are checked instead
	default:
		err = cannotRead("ConfigMap", namespace, audit.ArgoKnownHostsConfigMap, err)
	}
	found, _ := audit.ArgoCredentials(secrets.Items, repository, knownHosts, "ConfigMap "+namespace+"/"+audit.ArgoKnownHostsConfigMap)
	return found, err
}

// cannotRead names the object that could not be read and why, in the API
// server's words, which never hold a Secret's data.
func cannotRead(kind, namespace, name string, err error) error {
	return fmt.Errorf("cannot read %s %s/%s: %s", kind, namespace, name, describe(err))
}

// describe is an API error's reason, with its message when forbidden (it
// says which permission is missing).
func describe(err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return "not found"
	case apierrors.IsForbidden(err):
		return "forbidden: " + err.Error()
	}
	return err.Error()
}

// warnOnce prints each lookup error once, so a credential that could not
// be read is reported even when the clone then succeeds without it.
func warnOnce(out io.Writer, lookup func(context.Context, *embedopsv1.ModelCacheBinding) (audit.Credentials, error)) func(context.Context, *embedopsv1.ModelCacheBinding) (audit.Credentials, error) {
	warned := map[string]bool{}
	return func(ctx context.Context, binding *embedopsv1.ModelCacheBinding) (audit.Credentials, error) {
		creds, err := lookup(ctx, binding)
		if err != nil && !warned[err.Error()] {
			warned[err.Error()] = true
			fmt.Fprintf(out, "warning: %v; cloning without it\n", err)
		}
		return creds, err
	}
}

// givenCredentials are the credentials of the flags and the environment,
// which override the cluster's.
func givenCredentials(opts auditOptions, getenv func(string) string) (audit.Credentials, error) {
	creds := audit.CredentialsFromEnv(getenv)
	if opts.sshKey != "" {
		key, err := os.ReadFile(opts.sshKey)
		if err != nil {
			return creds, fmt.Errorf("reading --ssh-key: %w", err)
		}
		creds.SSHKey = key
		if creds.From != "" {
			creds.From += " and "
		}
		creds.From += "--ssh-key " + opts.sshKey
	}
	if opts.knownHosts != "" {
		hosts, err := os.ReadFile(opts.knownHosts)
		if err != nil {
			return creds, fmt.Errorf("reading --known-hosts: %w", err)
		}
		creds.KnownHosts, creds.KnownHostsFrom = hosts, "--known-hosts "+opts.knownHosts
	}
	return creds, nil
}
