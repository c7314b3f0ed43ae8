package tei

import (
	corev1 "k8s.io/api/core/v1"
)

// ContainerEnvironment is the environment TEI starts with in pod podName:
// the image's ENV (ImageEnv), HOSTNAME set to the pod's name by the
// container runtime, then the container's env in order, a later entry
// replacing an earlier one as the kubelet does. A value from a Secret,
// ConfigMap or field stands as a placeholder "from-<NAME>": clap only sees
// that it is set.
func ContainerEnvironment(podName string, env []corev1.EnvVar) map[string]string {
	out := map[string]string{"HOSTNAME": podName}
	for name, value := range ImageEnv {
		out[name] = value
	}
	for _, e := range env {
		value := e.Value
		if e.ValueFrom != nil {
			value = "from-" + e.Name
		}
		out[e.Name] = value
	}
	return out
}
