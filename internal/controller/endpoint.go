package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

// reconcileEndpoint asks an Available server's Service for TEI's /info when
// the check is on, with the server's API key when it has one, and records
// the answer in status.served. Ready pods that do not answer make
// Ready=False EndpointUnavailable, a wait retried after the progress
// interval; status.served then keeps the last answer, which the Ready
// condition marks as stale. TEI reports as model_sha the --revision it was
// started with, as given (TEI router/src/lib.rs, "model_sha: revision"):
// it is compared with the same, the binding's resolved commit once a
// populator recorded it, else the spec's revision, and status.served says
// which. Another model_id or model_sha is noted in Ready's message, which
// stays True, and announced by a Warning event when the fetched message did
// not note it. An answering server is asked again after the endpoint
// interval.
func (r *EmbeddingServerReconciler) reconcileEndpoint(ctx context.Context, scope *serverScope) (ctrl.Result, error) {
	server := scope.server
	if !r.endpointCheck || conditions.GetReason(server, embedopsv1.ReadyCondition) != embedopsv1.AvailableReason ||
		!conditions.IsTrue(server, embedopsv1.ReadyCondition) {
		return ctrl.Result{}, nil
	}
	url := infoURL(scope.service)
	if url == "" {
		return ctrl.Result{}, nil
	}
	served, err := r.askInfo(ctx, server, url)
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("endpoint unavailable", "url", url, "error", err.Error())
		conditions.MarkFalse(server, embedopsv1.ReadyCondition, embedopsv1.EndpointUnavailableReason,
			"%s but the Service does not answer: %s", conditions.GetMessage(server, embedopsv1.ReadyCondition), err.Error())
		return ctrl.Result{RequeueAfter: jitter(r.progressInterval)}, nil
	}
	served.ExpectedModelSHA, served.ComparedWith = expectedModelSHA(server, scope.cache)
	server.Status.Served = served
	for _, m := range servedMismatches(server, served) {
		conditions.MarkTrue(server, embedopsv1.ReadyCondition, embedopsv1.AvailableReason,
			"%s; %s", conditions.GetMessage(server, embedopsv1.ReadyCondition), m.message)
		if before := scope.readyBefore; before == nil || !strings.Contains(before.Message, m.message) {
			r.events.Eventf(server, nil, corev1.EventTypeWarning, m.reason, "Reconcile", "%s", m.message)
		}
	}
	return ctrl.Result{RequeueAfter: jitter(r.endpointInterval)}, nil
}

// askInfo asks /info with the server's API key. The key is never logged:
// errors name its source only.
func (r *EmbeddingServerReconciler) askInfo(ctx context.Context, server *embedopsv1.EmbeddingServer, url string) (*embedopsv1.ServedModel, error) {
	apiKey, err := r.apiKeyOf(ctx, server)
	if err != nil {
		return nil, err
	}
	return r.endpoint.Info(ctx, url, apiKey)
}

// expectedModelSHA is the --revision TEI runs with, which /info reports as
// model_sha, and what it is.
func expectedModelSHA(server *embedopsv1.EmbeddingServer, cache *builder.Cache) (string, embedopsv1.ServedComparison) {
	revision := builder.ServedRevision(server, cache)
	if cache != nil && cache.Populated() && cache.ResolvedCommit != "" && revision == cache.ResolvedCommit {
		return revision, embedopsv1.ComparedWithResolvedCommit
	}
	return revision, embedopsv1.ComparedWithSpecRevision
}

// mismatch is one way TEI serves something else than it was started for.
type mismatch struct {
	reason, message string
}

// servedMismatches compares /info with how TEI was started: model_id with
// --model-id (spec.model.name) and model_sha with --revision. A field TEI
// left empty is not compared.
func servedMismatches(server *embedopsv1.EmbeddingServer, served *embedopsv1.ServedModel) []mismatch {
	var found []mismatch
	if served.ModelID != "" && served.ModelID != server.Spec.Model.Name {
		found = append(found, mismatch{embedopsv1.ServedModelMismatchReason,
			fmt.Sprintf("TEI serves model %s, the spec asks for %s", served.ModelID, server.Spec.Model.Name)})
	}
	if served.ModelSHA != "" && served.ExpectedModelSHA != "" && served.ModelSHA != served.ExpectedModelSHA {
		source := "the binding's resolved commit"
		if served.ComparedWith == embedopsv1.ComparedWithSpecRevision {
			source = "the spec's revision"
		}
		found = append(found, mismatch{embedopsv1.ServedRevisionMismatchReason,
			fmt.Sprintf("TEI serves model revision %s, it was started on %s (%s)", served.ModelSHA, served.ExpectedModelSHA, source)})
	}
	return found
}

// endpointCheckState is the status.endpointCheck of the check being on.
func endpointCheckState(enabled bool) embedopsv1.EndpointCheckState {
	if enabled {
		return embedopsv1.EndpointCheckEnabled
	}
	return embedopsv1.EndpointCheckDisabled
}

// infoURL is the /info address of the client Service. It ends in ".svc",
// which the pod's DNS search path completes whatever the cluster domain.
func infoURL(service *corev1.Service) string {
	if service == nil || len(service.Spec.Ports) == 0 {
		return ""
	}
	return fmt.Sprintf("http://%s.%s.svc:%d/info", service.Name, service.Namespace, service.Spec.Ports[0].Port)
}

// TEI's API key settings (TEI router/src/main.rs: `#[clap(long, env)]
// api_key`, so --api-key, else the variable API_KEY).
const (
	apiKeyEnv  = "API_KEY"
	apiKeyFlag = "--api-key"
)

// apiKeyOf returns the API key the server's TEI runs with, "" when none:
// --api-key in spec.args wins over API_KEY in spec.env, as clap reads
// them. A key from a Secret is read with an uncached Get, so no Secret is
// cached. The key is never logged, recorded or put in an error.
func (r *EmbeddingServerReconciler) apiKeyOf(ctx context.Context, server *embedopsv1.EmbeddingServer) (string, error) {
	if key, ok := apiKeyArg(server.Spec.Args); ok {
		return key, nil
	}
	var found *corev1.EnvVar
	for i := range server.Spec.Env {
		if server.Spec.Env[i].Name == apiKeyEnv {
			found = &server.Spec.Env[i] // the last one wins, as in a container
		}
	}
	switch {
	case found == nil:
		return "", nil
	case found.ValueFrom == nil:
		return found.Value, nil
	case found.ValueFrom.SecretKeyRef == nil:
		return "", fmt.Errorf("%s comes from neither a value nor a Secret: the endpoint check cannot send it", apiKeyEnv)
	}
	ref := found.ValueFrom.SecretKeyRef
	secret := &corev1.Secret{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: server.Namespace, Name: ref.Name}, secret)
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("the %s Secret %s/%s does not exist", apiKeyEnv, server.Namespace, ref.Name)
	}
	if err != nil {
		return "", fmt.Errorf("reading the %s Secret %s/%s: %w", apiKeyEnv, server.Namespace, ref.Name, err)
	}
	key, ok := secret.Data[ref.Key]
	if !ok {
		return "", fmt.Errorf("the %s Secret %s/%s has no key %q", apiKeyEnv, server.Namespace, ref.Name, ref.Key)
	}
	return string(key), nil
}

// apiKeyArg finds --api-key=KEY or --api-key KEY in TEI's arguments.
func apiKeyArg(args []string) (string, bool) {
	key, found := "", false
	for i, arg := range args {
		if v, ok := strings.CutPrefix(arg, apiKeyFlag+"="); ok {
			key, found = v, true
		} else if arg == apiKeyFlag && i+1 < len(args) {
			key, found = args[i+1], true
		}
	}
	return key, found
}
