package builder

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// The Shared cache's populate Job.
const (
	// populateJobSuffix follows the binding's name in its Job's name.
	populateJobSuffix = "-populate"
	// maxJobNameLength is the longest Job name the API server accepts: the
	// Job controller copies it into a pod label.
	maxJobNameLength = 63
	// jobNameHashLength is how many hex digits of the binding name's hash
	// stand in for the part of a long name that is cut.
	jobNameHashLength = 8
	// populateBackoffLimit is how many times the Job's pod is retried
	// (with the Job controller's exponential backoff) before it fails.
	populateBackoffLimit = int32(3)
	// hubEndpointEnvName names the hub the populator downloads from.
	hubEndpointEnvName = "HF_ENDPOINT"
)

// PopulateJobName is the name of the Job that fills binding's Shared claim:
// "<binding>-populate", or, when that is longer than a Job name may be (a
// suffixed binding of a long model name), the binding's name cut short and a
// hash of the whole of it, so two bindings never share a Job.
func PopulateJobName(binding string) string {
	name := binding + populateJobSuffix
	if len(name) <= maxJobNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(binding))
	keep := maxJobNameLength - len(populateJobSuffix) - jobNameHashLength - 1
	return strings.TrimRight(binding[:keep], "-") + "-" + hex.EncodeToString(sum[:])[:jobNameHashLength] + populateJobSuffix
}

// PopulateJob runs `embedops populate` once on the Shared claim of binding,
// for server (the first server that needs it: its model, revision and token
// Secret). The binding owns the Job, so it lives as long as the claim. The
// pod template is immutable, so the controller creates the Job and never
// updates it.
func PopulateJob(server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, cache *Cache) (*batchv1.Job, error) {
	if cache.mode() != embedopsv1.CacheModeShared || cache.PopulatorImage == "" {
		return nil, fmt.Errorf("%w: a populate Job needs a Shared cache with a populator image", errInvalidCache)
	}
	if err := cache.validate(); err != nil {
		return nil, err
	}
	labels := map[string]string{embedopsv1.PopulatesLabel: binding.Name}
	container := populateContainer(server, cache)
	container.Env = append(container.Env, hubEndpointEnv(server)...)
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      PopulateJobName(binding.Name),
			Namespace: binding.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(binding,
				embedopsv1.GroupVersion.WithKind(embedopsv1.ModelCacheBindingKind))},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(populateBackoffLimit),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: new(false),
					SecurityContext:              podSecurityContext(),
					Containers:                   []corev1.Container{container},
					Volumes:                      cache.podVolumes(),
				},
			},
		},
	}, nil
}

// hubEndpointEnv is the server's HF_ENDPOINT, so the Job downloads from the
// hub mirror TEI would use. (A PerReplica init container is tuned through
// spec.podTemplate instead.)
func hubEndpointEnv(server *embedopsv1.EmbeddingServer) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, e := range server.Spec.Env {
		if e.Name == hubEndpointEnvName {
			env = append(env, e)
		}
	}
	return env
}
