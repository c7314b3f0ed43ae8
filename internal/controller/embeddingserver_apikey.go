package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

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
