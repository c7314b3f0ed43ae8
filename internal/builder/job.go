package builder

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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
	// hubEndpointEnvName names the hub TEI and the populator download from
	// (hf-hub v0.4 src/api/tokio.rs, ApiBuilder::from_env).
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
// for server (the first server that needs it: its model, revision, token
// Secret, hub and network settings). It downloads what every TEI backend
// reads (--all-backends), since servers of any image share the claim. Its
// pod is placed and pulled as the server's pods are (populatePodSpec), and
// runs at most facts.PopulateDeadline. The binding owns the Job, so it
// lives as long as the claim. The pod template is immutable, so the
// controller creates the Job and never updates it; its pod prunes the
// claim (populateContainer), and a replacement pod starts only once the
// last one has terminated (podReplacementPolicy Failed).
//
// A PerReplica binding's Job only resolves the revision (ResolvesFirst):
// `--resolve-only`, on no volume. An existing claim's Job only verifies
// it (verifyContainer): `--verify-only`, on the claim mounted read-only,
// placed as the server's pods are so it reaches the volume where they do.
func PopulateJob(server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, cache *Cache, facts Facts) (*batchv1.Job, error) {
	if !cache.Populated() {
		return nil, fmt.Errorf("%w: a populate Job needs a cache with a populator image", errInvalidCache)
	}
	serverPod, err := PodTemplate(server, cache, facts)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{embedopsv1.PopulatesLabel: binding.Name}
	container := populateContainer(server, cache, []string{"--all-backends"})
	spec := populatePodSpec(&serverPod.Spec, container, cache, server)
	switch {
	case cache.mode() == embedopsv1.CacheModePerReplica:
		spec = resolvePodSpec(&serverPod.Spec, resolveContainer(server, cache), server)
	case cache.Existing:
		spec = populatePodSpec(&serverPod.Spec, verifyContainer(server, cache), cache, server)
		spec.Volumes = cache.podVolumes() // the claim alone: it reaches no hub, so it needs no CA bundle.
	}
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
			BackoffLimit:          new(populateBackoffLimit),
			ActiveDeadlineSeconds: deadlineSeconds(facts.PopulateDeadline),
			// Failed: a replacement pod starts only once the last one has
			// terminated, never beside it on the claim while it prunes
			// (kubernetes v1.37.2 pkg/controller/job/job_controller.go,
			// onlyReplaceFailedPods; the API server defaults an unset policy
			// to TerminatingOrFailed, pkg/apis/batch/v1/defaults.go;
			// JobPodReplacementPolicy is GA since 1.34). The Job sets no
			// podFailurePolicy, with which Failed is the only value allowed
			// (pkg/apis/batch/validation/validation.go,
			// validatePodReplacementPolicy).
			PodReplacementPolicy: new(batchv1.Failed),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec,
			},
		},
	}, nil
}

// populatePodSpec is the Job's pod: the populate container on the cache and
// CA bundle volumes, placed and pulled as the server's pods are. It takes
// from the server's pod (spec.podTemplate applied) the node selector,
// tolerations and node affinity, so it runs where tainted GPU nodes let
// the server run, and the service account and image pull secrets, so a
// private populator image is pulled as the server's images are. Pod
// (anti-)affinity and topology spread are left out: they select the
// server's pods, which the Job's pod is not.
func populatePodSpec(serverPod *corev1.PodSpec, container corev1.Container, cache *Cache, server *embedopsv1.EmbeddingServer) corev1.PodSpec {
	spec := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           serverPod.ServiceAccountName,
		AutomountServiceAccountToken: new(false),
		ImagePullSecrets:             slices.Clone(serverPod.ImagePullSecrets),
		NodeSelector:                 maps.Clone(serverPod.NodeSelector),
		Tolerations:                  slices.Clone(serverPod.Tolerations),
		SecurityContext:              podSecurityContext(),
		Containers:                   []corev1.Container{container},
		Volumes:                      append(cache.podVolumes(), caBundleVolumes(server)...),
	}
	if affinity := serverPod.Affinity; affinity != nil && affinity.NodeAffinity != nil {
		spec.Affinity = &corev1.Affinity{NodeAffinity: affinity.NodeAffinity.DeepCopy()}
	}
	return spec
}

// resolvePodSpec is a resolve Job's pod: the resolve container, pulled
// with the server's service account and pull secrets, but placed anywhere.
// It mounts no cache, so it needs none of the server's nodes: a server
// waiting for a GPU node (Unschedulable, reported on the server) or for one
// the autoscaler adds must not wait for it to learn its commit too.
func resolvePodSpec(serverPod *corev1.PodSpec, container corev1.Container, server *embedopsv1.EmbeddingServer) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           serverPod.ServiceAccountName,
		AutomountServiceAccountToken: new(false),
		ImagePullSecrets:             slices.Clone(serverPod.ImagePullSecrets),
		SecurityContext:              podSecurityContext(),
		Containers:                   []corev1.Container{container},
		Volumes:                      caBundleVolumes(server),
	}
}

// deadlineSeconds is a positive deadline in whole seconds, rounded up, or
// nil for none.
func deadlineSeconds(deadline time.Duration) *int64 {
	if deadline <= 0 {
		return nil
	}
	return new(int64((deadline + time.Second - 1) / time.Second))
}
