package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"net/url"
	"strings"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

// reconcileAccepted checks that the spec's references resolve: a token Secret
// or CA bundle that is missing, or lacks its key, stalls the server before
// any child is applied, because its pods could only fail (the kubelet
// cannot start a container whose Secret key is missing,
// CreateContainerConfigError, nor mount a missing ConfigMap or Secret
// volume, FailedMount); so does a spec.cache.existingClaim that does not
// exist or is not Bound (existingClaimProblem). Secrets and the user's
// claims are not watched (they are not cached at all), so the stalled
// server polls for them every progress interval, as kustomize-controller polls for a dependency
// (its --requeue-dependency, 30s by default).
func (r *EmbeddingServerReconciler) reconcileAccepted(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	if problem := proxyProblem(server); problem != "" {
		return ctrl.Result{}, r.refuseSpec(scope, errors.New(problem))
	}
	if ref := server.Spec.Model.TokenSecretRef; ref != nil {
		problem, err := r.tokenProblem(ctx, server.Namespace, ref)
		if err != nil {
			return ctrl.Result{}, err
		}
		if problem != "" {
			return r.refuseReference(scope, embedopsv1.SecretNotFoundReason, problem), nil
		}
	}
	if ref := server.Spec.Model.CABundleRef; ref != nil {
		problem, err := r.caBundleProblem(ctx, server.Namespace, ref)
		if err != nil {
			return ctrl.Result{}, err
		}
		if problem != "" {
			return r.refuseReference(scope, embedopsv1.CABundleNotFoundReason, problem), nil
		}
	}
	if claim := server.Spec.Cache.ExistingClaim; claim != "" {
		reason, problem, err := r.existingClaimProblem(ctx, server.Namespace, claim)
		if err != nil {
			return ctrl.Result{}, err
		}
		if problem != "" {
			return r.refuseReference(scope, reason, problem), nil
		}
	}
	conditions.MarkTrue(server, embedopsv1.AcceptedCondition, embedopsv1.ValidReason, "the spec is valid and its references resolve")
	return ctrl.Result{}, nil
}

// existingClaimProblem says why spec.cache.existingClaim cannot be mounted
// yet, with its reason, or "" when it exists and is Bound: a pod on a
// missing claim is never scheduled, and one on a Pending claim waits for a
// volume (kube-scheduler VolumeBinding plugin), so the server stalls
// before any child or verify Job is made. Read uncached: the cache holds
// only the claims embedops labels, and the user's is not one of them.
func (r *EmbeddingServerReconciler) existingClaimProblem(ctx context.Context, namespace, name string) (string, string, error) {
	claim := &corev1.PersistentVolumeClaim{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, claim)
	switch {
	case apierrors.IsNotFound(err):
		return embedopsv1.ClaimNotFoundReason, fmt.Sprintf("cache.existingClaim %s/%s does not exist: create it, filled with the model, or remove existingClaim", namespace, name), nil
	case err != nil:
		return "", "", fmt.Errorf("reading cache.existingClaim %s/%s: %w", namespace, name, err)
	case claim.Status.Phase != corev1.ClaimBound:
		phase := cmp.Or(string(claim.Status.Phase), "without a phase")
		return embedopsv1.ClaimNotBoundReason, fmt.Sprintf("cache.existingClaim %s/%s is %s, not Bound: no pod can mount it until it is bound to a volume holding the model", namespace, name, phase), nil
	}
	return "", "", nil
}

// tokenProblem says what is wrong with the token Secret, or "" when it has the
// key. The Secret is read with an uncached Get, so no Secret data is ever
// cached, and only the key's presence is looked at.
func (r *EmbeddingServerReconciler) tokenProblem(ctx context.Context, namespace string, ref *embedopsv1.SecretKeyRef) (string, error) {
	secret := &corev1.Secret{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("token Secret %s/%s does not exist", namespace, ref.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading token Secret %s/%s: %w", namespace, ref.Name, err)
	}
	if _, ok := secret.Data[ref.Key]; !ok {
		return fmt.Sprintf("token Secret %s/%s has no key %q", namespace, ref.Name, ref.Key), nil
	}
	return "", nil
}

// refuseReference marks the server not Accepted for reason and stalls it
// until the reference resolves.
func (r *EmbeddingServerReconciler) refuseReference(scope *serverScope, reason, problem string) ctrl.Result {
	conditions.MarkFalse(scope.server, embedopsv1.AcceptedCondition, reason, "%s", problem)
	r.stallAndPoll(scope, reason, errors.New(problem))
	return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}
}

// caBundleProblem says what is wrong with the CA bundle's ConfigMap or
// Secret, or "" when it has the key. It is read uncached, as the token
// Secret is, and only the key's presence is looked at.
func (r *EmbeddingServerReconciler) caBundleProblem(ctx context.Context, namespace string, ref *embedopsv1.CABundleRef) (string, error) {
	key := builder.CABundleKey(ref)
	var keys []string
	var err error
	if ref.Kind == "Secret" {
		secret := &corev1.Secret{}
		err = r.apiReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, secret)
		keys = slices.Collect(maps.Keys(secret.Data))
	} else {
		configMap := &corev1.ConfigMap{}
		err = r.apiReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, configMap)
		keys = append(slices.Collect(maps.Keys(configMap.Data)), slices.Collect(maps.Keys(configMap.BinaryData))...)
	}
	kind := cmp.Or(ref.Kind, "ConfigMap")
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("CA bundle %s %s/%s does not exist", kind, namespace, ref.Name), nil
	case err != nil:
		return "", fmt.Errorf("reading CA bundle %s %s/%s: %w", kind, namespace, ref.Name, err)
	case !slices.Contains(keys, key):
		return fmt.Sprintf("CA bundle %s %s/%s has no key %q", kind, namespace, ref.Name, key), nil
	}
	return "", nil
}

// proxyVariables are the variables TEI's HTTP client (reqwest
// src/proxy.rs) and the populator (golang.org/x/net/http/httpproxy) take a
// proxy URL from.
var proxyVariables = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}

// proxySchemes are the proxy schemes both clients support.
var proxySchemes = []string{"http", "https", "socks5", "socks5h"}

// proxyProblem says which literal proxy variable of spec.env neither TEI
// nor the populator could use, or "". Both read a URL or a bare host:port,
// which they take as http://host:port (httpproxy.parseProxy retries with
// "http://" prepended; here only a value without "://" is, so "http://"
// alone is refused, not read as host "http:"); a value that is neither
// makes every download fail.
// Values from a Secret or ConfigMap are not seen here.
func proxyProblem(server *embedopsv1.EmbeddingServer) string {
	for _, e := range server.Spec.Env {
		if !slices.Contains(proxyVariables, e.Name) || e.ValueFrom != nil || e.Value == "" {
			continue
		}
		if err := checkProxyURL(e.Value); err != nil {
			return fmt.Sprintf("env %s=%q: %v", e.Name, e.Value, err)
		}
	}
	return ""
}

// checkProxyURL parses a proxy variable's value as httpproxy does and
// checks that it names a host with a supported scheme.
func checkProxyURL(value string) error {
	if strings.ContainsAny(value, " \t\n") {
		return fmt.Errorf("a proxy URL has no spaces")
	}
	if !strings.Contains(value, "://") {
		value = "http://" + value
	}
	parsed, err := url.Parse(value)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL or host:port: %w", err)
	case !slices.Contains(proxySchemes, parsed.Scheme):
		return fmt.Errorf("scheme %q is not one of %s", parsed.Scheme, strings.Join(proxySchemes, ", "))
	case parsed.Hostname() == "":
		return fmt.Errorf("no proxy host")
	case parsed.Path != "" && parsed.Path != "/":
		return fmt.Errorf("a proxy URL has no path")
	}
	return nil
}
