package builder

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// The populate init container.
const (
	// PopulateContainerName names the init container that downloads the
	// model into a PerReplica claim; the controller reads its termination
	// message.
	PopulateContainerName = "populate"
	// TerminationLogPath is where the populate init container writes its
	// result, as JSON, for the kubelet to keep as its termination message.
	TerminationLogPath = "/dev/termination-log"
)

// populateResources are modest: the populator streams files to disk.
var populateResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("128Mi"),
	},
	Limits: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("512Mi"),
	},
}

// initContainers are the pod's init containers: populate when the cache
// asks for it, else none.
func initContainers(server *embedopsv1.EmbeddingServer, cache *Cache) []corev1.Container {
	if !cache.populates() {
		return nil
	}
	return []corev1.Container{populateContainer(server, cache)}
}

// populateContainer runs `embedops populate` on the replica's claim, with
// the token from its Secret (never its value): the files TEI's image reads,
// at the revision TEI runs.
func populateContainer(server *embedopsv1.EmbeddingServer, cache *Cache) corev1.Container {
	var env []corev1.EnvVar
	if ref := server.Spec.Model.TokenSecretRef; ref != nil {
		env = []corev1.EnvVar{{
			Name: tokenEnv,
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
				Key:                  ref.Key,
			}},
		}}
	}
	return corev1.Container{
		Name:  PopulateContainerName,
		Image: cache.PopulatorImage,
		Command: []string{
			"/embedops", "populate",
			"--model", server.Spec.Model.Name,
			"--revision", ServedRevision(server, cache),
			"--image", image(server),
			"--dir", CacheMountPath,
			"--termination-log", TerminationLogPath,
		},
		Env:                      env,
		Resources:                *populateResources.DeepCopy(),
		VolumeMounts:             []corev1.VolumeMount{cache.volumeMount()},
		TerminationMessagePath:   TerminationLogPath,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurityContext(),
	}
}
