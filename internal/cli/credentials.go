package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/audit"
	"github.com/embedops/embedops/internal/provenance"
)

// The Flux kinds a binding's Kustomization leads to.
var (
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	gitRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}
	ociRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}
)

// clusterCredentials finds a binding's git credentials as the GitOps tool
// that applied it has them: a Flux binding's Kustomization leads to its
// GitRepository and spec.secretRef (or its OCIRepository and
// spec.certSecretRef); an Argo CD binding's repository to Argo's
// repository and repo-creds Secrets, with Argo's SSH known hosts and TLS
// certificates, all in Argo CD's own namespace, where Argo CD reads them
// whatever the Application's namespace. What it cannot read is an error
// naming the object, never a value.
type clusterCredentials struct {
	client client.Client
	// argoNamespace is where Argo CD keeps its Secrets and ConfigMaps;
	// empty means provenance.DefaultArgoCDNamespace.
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
		return c.argo(ctx, cmp.Or(c.argoNamespace, provenance.DefaultArgoCDNamespace), source.Repository)
	}
	return audit.Credentials{}, nil
}

// flux reads the credentials of the Kustomization's source: a
// GitRepository's secretRef Secret, when that repository is still the
// recorded one, or an OCIRepository's certSecretRef Secret.
func (c *clusterCredentials) flux(ctx context.Context, ref *embedopsv1.SourceObjectReference, repository string) (audit.Credentials, error) {
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(kustomizationGVK)
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, ks); err != nil {
		return audit.Credentials{}, cannotRead("Kustomization", ref.Namespace, ref.Name, err)
	}
	kind, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "kind")
	name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	namespace, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "namespace")
	gvk := map[string]schema.GroupVersionKind{gitRepositoryGVK.Kind: gitRepositoryGVK, ociRepositoryGVK.Kind: ociRepositoryGVK}[kind]
	if gvk.Empty() || name == "" {
		return audit.Credentials{}, nil
	}
	if namespace == "" {
		namespace = ks.GetNamespace()
	}
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(gvk)
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, src); err != nil {
		return audit.Credentials{}, cannotRead(kind, namespace, name, err)
	}
	url, _, _ := unstructured.NestedString(src.Object, "spec", "url")
	if gvk == ociRepositoryGVK {
		// The audit clones the artifact's git origin, never the registry.
		secret, err := c.secret(ctx, namespace, src, "certSecretRef")
		if secret == nil {
			return audit.Credentials{}, err
		}
		return audit.FluxCertCredentials(secret, url, repository)
	}
	if url != repository {
		return audit.Credentials{}, nil // moved to another repository: its credentials are not this one's
	}
	secret, err := c.secret(ctx, namespace, src, "secretRef")
	if secret == nil {
		return audit.Credentials{}, err
	}
	return audit.FluxCredentials(secret, url)
}

// secret reads the Secret a source object's spec.<field>.name names; nil
// and no error when it names none.
func (c *clusterCredentials) secret(ctx context.Context, namespace string, src *unstructured.Unstructured, field string) (*corev1.Secret, error) {
	name, _, _ := unstructured.NestedString(src.Object, "spec", field, "name")
	if name == "" {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, cannotRead("Secret", namespace, name, err)
	}
	return secret, nil
}

// argo picks Argo CD's Secret for the repository, with Argo's known hosts
// for SSH and its TLS certificates for HTTPS.
func (c *clusterCredentials) argo(ctx context.Context, namespace, repository string) (audit.Credentials, error) {
	typed, err := labels.NewRequirement(audit.ArgoSecretTypeLabel, selection.In, []string{audit.ArgoRepository, audit.ArgoRepoCreds})
	if err != nil {
		return audit.Credentials{}, err
	}
	var secrets corev1.SecretList
	if err := c.client.List(ctx, &secrets, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*typed)}); err != nil {
		return audit.Credentials{}, fmt.Errorf("cannot list the Secrets labelled %s in namespace %s: %s", audit.ArgoSecretTypeLabel, namespace, describe(err))
	}
	// Without them, the user's known_hosts files and the system's CAs are
	// used instead.
	knownHosts, hostsErr := c.optionalConfigMap(ctx, namespace, audit.ArgoKnownHostsConfigMap)
	tlsCerts, certsErr := c.optionalConfigMap(ctx, namespace, audit.ArgoTLSCertsConfigMap)
	found, _, err := audit.ArgoCredentials(secrets.Items, knownHosts, tlsCerts, repository)
	return found, errors.Join(err, hostsErr, certsErr)
}

// optionalConfigMap reads a ConfigMap that may not exist: nil then.
func (c *clusterCredentials) optionalConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
	switch {
	case err == nil:
		return cm, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	}
	return nil, cannotRead("ConfigMap", namespace, name, err)
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
// which override the cluster's, with the repositories they are for:
// --credentials-for and $GIT_CREDENTIALS_FOR.
func givenCredentials(opts auditOptions, getenv func(string) string) (*audit.GivenCredentials, error) {
	given := &audit.GivenCredentials{Credentials: audit.CredentialsFromEnv(getenv), OverHTTP: opts.allowInsecureCredentials}
	scopes, err := audit.ParseCredentialScopes(strings.Join(append([]string{getenv(audit.EnvCredentialsFor)}, opts.credentialsFor...), ","))
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	given.For = scopes
	if opts.sshKey != "" {
		key, err := readCredentialFile("--ssh-key", opts.sshKey)
		if err != nil {
			return nil, err
		}
		given.SSHKey = key
		if given.From != "" {
			given.From += " and "
		}
		given.From += "--ssh-key " + opts.sshKey
	}
	if opts.knownHosts != "" {
		hosts, err := readCredentialFile("--known-hosts", opts.knownHosts)
		if err != nil {
			return nil, err
		}
		given.KnownHosts, given.KnownHostsFrom = hosts, "--known-hosts "+opts.knownHosts
	}
	return given, nil
}

// maxCredentialFile caps a file a flag names: as much as a Secret may
// hold (1 MiB, kubernetes pkg/apis/core/types.go MaxSecretSize).
const maxCredentialFile = 1 << 20

// readCredentialFile reads the file a flag names, refusing one over
// maxCredentialFile (a device such as /dev/zero never ends).
func readCredentialFile(flag, name string) ([]byte, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", flag, err)
	}
	defer func() { _ = file.Close() }()
	data, err := io.ReadAll(io.LimitReader(file, maxCredentialFile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", flag, err)
	case len(data) > maxCredentialFile:
		return nil, fmt.Errorf("reading %s: %s is over %d bytes: refused", flag, name, maxCredentialFile)
	}
	return data, nil
}

// warnUnscoped says, before the audit, that given credentials have no
// repository to go to.
func warnUnscoped(out io.Writer, given *audit.GivenCredentials) {
	if given.From != "" && len(given.For) == 0 {
		fmt.Fprintf(out, "warning: %s not sent to any repository: name their hosts with --credentials-for or $%s\n", given.From, audit.EnvCredentialsFor)
	}
}

// warnUnmatched says, after the audit, once per scope, that credentials
// were given for a repository the audit did not clone.
func warnUnmatched(out io.Writer, given *audit.GivenCredentials) {
	for _, scope := range given.Unmatched() {
		fmt.Fprintf(out, "warning: %s for %s not sent: no repository the audit cloned is there\n", given.From, scope)
	}
}

// diffCredentials are the given credentials for diff's --repo, the one
// repository it clones: the user named it, so it is their scope, and no
// other ($GIT_CREDENTIALS_FOR and --credentials-for are not read). A URL
// no scope can name (git://, or with user info) gets no secrets.
func diffCredentials(given *audit.GivenCredentials, repo string) (audit.Credentials, error) {
	given.For = nil
	if scope, err := audit.RepositoryScope(repo); err == nil {
		given.For = []audit.CredentialScope{scope}
	}
	return given.ForURL(repo)
}
