package builder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// ErrInvalidPodTemplate is wrapped by every error caused by spec.podTemplate:
// a patch that is not a valid strategic-merge patch of a pod template, or one
// that changes what the operator manages. The user must fix the manifest.
var ErrInvalidPodTemplate = errors.New("invalid spec.podTemplate")

// patchPodTemplate applies patch over generated as a strategic-merge patch
// of a corev1.PodTemplateSpec. No patch returns generated itself.
func patchPodTemplate(generated *corev1.PodTemplateSpec, patch *apiextensionsv1.JSON) (*corev1.PodTemplateSpec, error) {
	if patch == nil {
		return generated, nil
	}
	raw := bytes.TrimSpace(patch.Raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return generated, nil
	}
	var object map[string]any
	if err := json.Unmarshal(raw, &object); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %w", ErrInvalidPodTemplate, err)
	}
	original, err := json.Marshal(generated)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod template: %w", err)
	}
	merged, err := strategicpatch.StrategicMergePatch(original, raw, corev1.PodTemplateSpec{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPodTemplate, err)
	}
	// Unknown fields are refused rather than dropped: a misspelt field
	// would otherwise be ignored without a word.
	decoder := json.NewDecoder(bytes.NewReader(merged))
	decoder.DisallowUnknownFields()
	patched := &corev1.PodTemplateSpec{}
	if err := decoder.Decode(patched); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPodTemplate, err)
	}
	return patched, nil
}

// podTemplateCheck reports what a patch changed that it may not change.
type podTemplateCheck func(generated, patched *corev1.PodTemplateSpec) []string

// podTemplateChecks are run, in order, on every patched pod template.
var podTemplateChecks = []podTemplateCheck{
	keepsLabels,
	keepsContainer,
	keepsManagedArgs,
	keepsManagedEnv,
	keepsCacheMount,
	keepsCacheVolume,
	keepsPopulateContainer,
	keepsManagedSecurityContext,
	staysOffTheHost,
	staysUnprivileged,
	runsAsNonRoot,
}

// checkPatchedPodTemplate fails, wrapping ErrInvalidPodTemplate, when the
// patch took away something the operator relies on.
func checkPatchedPodTemplate(generated, patched *corev1.PodTemplateSpec) error {
	var problems []string
	for _, check := range podTemplateChecks {
		problems = append(problems, check(generated, patched)...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidPodTemplate, strings.Join(problems, "; "))
	}
	return nil
}

// keepsLabels checks that the selector and owner labels keep their values.
func keepsLabels(generated, patched *corev1.PodTemplateSpec) []string {
	var changed []string
	for _, key := range sortedKeys(generated.Labels) {
		if got, ok := patched.Labels[key]; !ok || got != generated.Labels[key] {
			changed = append(changed, key+"="+generated.Labels[key])
		}
	}
	if len(changed) > 0 {
		return []string{"the selector and owner labels must keep their values: " + strings.Join(changed, ", ")}
	}
	return nil
}

// keepsContainer checks that exactly one container is named ContainerName.
func keepsContainer(_, patched *corev1.PodTemplateSpec) []string {
	count := 0
	for _, c := range patched.Spec.Containers {
		if c.Name == ContainerName {
			count++
		}
	}
	if count != 1 {
		return []string{fmt.Sprintf("container %q must be kept (found %d); patch it by that name", ContainerName, count)}
	}
	return nil
}

// keepsManagedArgs checks that the flags naming the model, revision, port
// and host are unchanged and not repeated.
func keepsManagedArgs(generated, patched *corev1.PodTemplateSpec) []string {
	want, got := embedding(generated), embedding(patched)
	if got == nil {
		return nil
	}
	var changed []string
	for _, flag := range managedFlags {
		if !equality.Semantic.DeepEqual(withFlag(want.Args, flag), withFlag(got.Args, flag)) {
			changed = append(changed, flag)
		}
	}
	if len(changed) > 0 {
		return []string{fmt.Sprintf("container %q: the patch may not change args %s: use spec.model and spec.port (other flags go in spec.args)",
			ContainerName, strings.Join(changed, ", "))}
	}
	return nil
}

// keepsManagedEnv checks that the variables locating the cache or carrying
// the token are unchanged.
func keepsManagedEnv(generated, patched *corev1.PodTemplateSpec) []string {
	want, got := embedding(generated), embedding(patched)
	if got == nil {
		return nil
	}
	var changed []string
	for _, name := range managedEnv {
		if !equality.Semantic.DeepEqual(envNamed(want.Env, name), envNamed(got.Env, name)) {
			changed = append(changed, name)
		}
	}
	if len(changed) > 0 {
		return []string{fmt.Sprintf("container %q: the patch may not change env %s: use spec.cache and spec.model.tokenSecretRef",
			ContainerName, strings.Join(changed, ", "))}
	}
	return nil
}

// keepsCacheMount checks that the cache is still mounted at CacheMountPath.
func keepsCacheMount(generated, patched *corev1.PodTemplateSpec) []string {
	want, got := embedding(generated), embedding(patched)
	if got == nil {
		return nil
	}
	if !equality.Semantic.DeepEqual(mountsAt(want.VolumeMounts, CacheMountPath), mountsAt(got.VolumeMounts, CacheMountPath)) {
		return []string{fmt.Sprintf("container %q: the mount at %s is managed: use spec.cache", ContainerName, CacheMountPath)}
	}
	return nil
}

// keepsCacheVolume checks that the cache volume, if the pod has one, is
// unchanged, and that no pod volume shadows a claim template.
func keepsCacheVolume(generated, patched *corev1.PodTemplateSpec) []string {
	mounts := mountsAt(embedding(generated).VolumeMounts, CacheMountPath)
	var problems []string
	for _, mount := range mounts {
		if !equality.Semantic.DeepEqual(volumesNamed(generated.Spec.Volumes, mount.Name), volumesNamed(patched.Spec.Volumes, mount.Name)) {
			problems = append(problems, fmt.Sprintf("volume %q is managed: use spec.cache", mount.Name))
		}
	}
	return problems
}

// keepsPopulateContainer checks that the populate init container, if the
// pod has one, runs the same image and command with the same mounts and
// leaves its result where the controller reads it.
func keepsPopulateContainer(generated, patched *corev1.PodTemplateSpec) []string {
	want := populateInit(generated)
	if want == nil {
		return nil
	}
	got := populateInit(patched)
	if got == nil {
		return []string{fmt.Sprintf("init container %q is managed: it may not be removed", PopulateContainerName)}
	}
	if got.Image != want.Image || !equality.Semantic.DeepEqual(got.Command, want.Command) || len(got.Args) > 0 ||
		got.TerminationMessagePath != want.TerminationMessagePath || got.TerminationMessagePolicy != want.TerminationMessagePolicy ||
		!equality.Semantic.DeepEqual(got.VolumeMounts, want.VolumeMounts) {
		return []string{fmt.Sprintf("init container %q: the patch may change its resources and env only", PopulateContainerName)}
	}
	return nil
}

// populateInit returns the populate init container, or nil.
func populateInit(template *corev1.PodTemplateSpec) *corev1.Container {
	for i := range template.Spec.InitContainers {
		if template.Spec.InitContainers[i].Name == PopulateContainerName {
			return &template.Spec.InitContainers[i]
		}
	}
	return nil
}

// embedding returns the TEI container, or nil.
func embedding(template *corev1.PodTemplateSpec) *corev1.Container {
	for i := range template.Spec.Containers {
		if template.Spec.Containers[i].Name == ContainerName {
			return &template.Spec.Containers[i]
		}
	}
	return nil
}

// withFlag returns the args that set flag, as --flag=value or --flag value.
func withFlag(args []string, flag string) []string {
	var out []string
	for _, arg := range args {
		if arg == flag || strings.HasPrefix(arg, flag+"=") {
			out = append(out, arg)
		}
	}
	return out
}

func envNamed(env []corev1.EnvVar, name string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func mountsAt(mounts []corev1.VolumeMount, path string) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, m := range mounts {
		if m.MountPath == path {
			out = append(out, m)
		}
	}
	return out
}

func volumesNamed(volumes []corev1.Volume, name string) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range volumes {
		if v.Name == name {
			out = append(out, v)
		}
	}
	return out
}
