package builder

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The security checks below refuse, never strip, a patch that reaches the
// host or raises privileges: the server stalls until the manifest is fixed.
// The generated pod meets the restricted Pod Security Standard and a patch
// may not weaken its pod or managed containers below it. A container the
// patch adds is refused what it grants explicitly; in a namespace enforcing
// that standard it must also set allowPrivilegeEscalation false and drop ALL
// capabilities, or the namespace refuses its pods.

// netBindService is the one capability the restricted standard lets a
// container add.
const netBindService corev1.Capability = "NET_BIND_SERVICE"

// containerView is what the security checks read of a container of any
// kind: regular, init or ephemeral.
type containerView struct {
	// kind and name say which container, as messages name it.
	kind, name      string
	ports           []corev1.ContainerPort
	securityContext *corev1.SecurityContext
}

// label names the container in a message, e.g. `init container "populate"`.
func (c containerView) label() string {
	return fmt.Sprintf("%s %q", c.kind, c.name)
}

// containerViews lists every container of the pod, regular ones first.
func containerViews(template *corev1.PodTemplateSpec) []containerView {
	var views []containerView
	for _, c := range template.Spec.Containers {
		views = append(views, containerView{"container", c.Name, c.Ports, c.SecurityContext})
	}
	for _, c := range template.Spec.InitContainers {
		views = append(views, containerView{"init container", c.Name, c.Ports, c.SecurityContext})
	}
	for _, c := range template.Spec.EphemeralContainers {
		views = append(views, containerView{"ephemeral container", c.Name, c.Ports, c.SecurityContext})
	}
	return views
}

// managedContainers find the containers the operator generates, by kind.
var managedContainers = []struct {
	kind string
	find func(*corev1.PodTemplateSpec) *corev1.Container
}{{"container", embedding}, {"init container", populateInit}}

// keepsManagedSecurityContext checks that the containers the operator
// generates still forbid privilege escalation and drop every capability,
// and that the pod keeps a confining seccomp profile.
func keepsManagedSecurityContext(generated, patched *corev1.PodTemplateSpec) []string {
	var problems []string
	for _, managed := range managedContainers {
		if managed.find(generated) == nil {
			continue
		}
		got := managed.find(patched)
		if got == nil {
			continue
		}
		if sc := got.SecurityContext; sc == nil || ptr.Deref(sc.AllowPrivilegeEscalation, true) ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			problems = append(problems, fmt.Sprintf("%s %q: the patch may not remove allowPrivilegeEscalation false or the drop of ALL capabilities",
				managed.kind, got.Name))
		}
	}
	if sc := patched.Spec.SecurityContext; sc == nil || sc.SeccompProfile == nil ||
		(sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault && sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost) {
		problems = append(problems, "the pod must keep a RuntimeDefault or Localhost seccomp profile")
	}
	return problems
}

// staysOffTheHost checks that the pod shares none of the node's namespaces
// and mounts, binds or runs nothing on the node.
func staysOffTheHost(_, patched *corev1.PodTemplateSpec) []string {
	spec := patched.Spec
	var uses []string
	for _, namespace := range []struct {
		field  string
		shared bool
	}{{"hostNetwork", spec.HostNetwork}, {"hostPID", spec.HostPID}, {"hostIPC", spec.HostIPC}} {
		if namespace.shared {
			uses = append(uses, namespace.field)
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			uses = append(uses, fmt.Sprintf("hostPath volume %q", v.Name))
		}
	}
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil && ptr.Deref(sc.WindowsOptions.HostProcess, false) {
		uses = append(uses, "hostProcess")
	}
	for _, c := range containerViews(patched) {
		uses = append(uses, hostUses(c)...)
	}
	if len(uses) > 0 {
		return []string{"the pod may not use the host: " + strings.Join(uses, ", ")}
	}
	return nil
}

// hostUses are the host ports and host process of a container.
func hostUses(c containerView) []string {
	var uses []string
	for _, p := range c.ports {
		if p.HostPort != 0 {
			uses = append(uses, fmt.Sprintf("%s hostPort %d", c.label(), p.HostPort))
		}
	}
	if sc := c.securityContext; sc != nil && sc.WindowsOptions != nil && ptr.Deref(sc.WindowsOptions.HostProcess, false) {
		uses = append(uses, c.label()+" hostProcess")
	}
	return uses
}

// staysUnprivileged checks that no container is privileged, may escalate,
// adds a capability (NET_BIND_SERVICE aside), runs unconfined or unmasks
// /proc, and that the pod is not unconfined either.
func staysUnprivileged(_, patched *corev1.PodTemplateSpec) []string {
	var problems []string
	if sc := patched.Spec.SecurityContext; sc != nil {
		if granted := unconfined(sc.SeccompProfile, sc.AppArmorProfile); len(granted) > 0 {
			problems = append(problems, "the pod may not run with "+strings.Join(granted, ", "))
		}
	}
	for _, c := range containerViews(patched) {
		if granted := privileges(c.securityContext); len(granted) > 0 {
			problems = append(problems, fmt.Sprintf("%s may not run with %s", c.label(), strings.Join(granted, ", ")))
		}
	}
	return problems
}

// privileges are what a container's security context grants beyond the
// restricted Pod Security Standard.
func privileges(sc *corev1.SecurityContext) []string {
	if sc == nil {
		return nil
	}
	var granted []string
	if ptr.Deref(sc.Privileged, false) {
		granted = append(granted, "privileged")
	}
	if ptr.Deref(sc.AllowPrivilegeEscalation, false) {
		granted = append(granted, "allowPrivilegeEscalation")
	}
	if sc.Capabilities != nil {
		for _, capability := range sc.Capabilities.Add {
			if capability != netBindService {
				granted = append(granted, "capability "+string(capability))
			}
		}
	}
	if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
		granted = append(granted, "procMount Unmasked")
	}
	return append(granted, unconfined(sc.SeccompProfile, sc.AppArmorProfile)...)
}

// unconfined names the Unconfined seccomp and AppArmor profiles.
func unconfined(seccomp *corev1.SeccompProfile, appArmor *corev1.AppArmorProfile) []string {
	var out []string
	if seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeUnconfined {
		out = append(out, "seccomp profile Unconfined")
	}
	if appArmor != nil && appArmor.Type == corev1.AppArmorProfileTypeUnconfined {
		out = append(out, "AppArmor profile Unconfined")
	}
	return out
}

// runsAsNonRoot checks that neither the pod nor a container runs as user 0
// or turns runAsNonRoot off, and that every container still runs with
// runAsNonRoot, its own or the pod's.
func runsAsNonRoot(_, patched *corev1.PodTemplateSpec) []string {
	var problems []string
	pod := patched.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	if root := rootSettings(pod.RunAsUser, pod.RunAsNonRoot); len(root) > 0 {
		problems = append(problems, "the pod may not run as root: "+strings.Join(root, ", "))
	}
	for _, c := range containerViews(patched) {
		sc := c.securityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		root := rootSettings(sc.RunAsUser, sc.RunAsNonRoot)
		if sc.RunAsNonRoot == nil && pod.RunAsNonRoot == nil {
			root = append(root, "runAsNonRoot unset")
		}
		if len(root) > 0 {
			problems = append(problems, fmt.Sprintf("%s may not run as root: %s", c.label(), strings.Join(root, ", ")))
		}
	}
	return problems
}

// rootSettings names a runAsUser of 0 and a runAsNonRoot of false.
func rootSettings(runAsUser *int64, runAsNonRoot *bool) []string {
	var root []string
	if runAsUser != nil && *runAsUser == 0 {
		root = append(root, "runAsUser 0")
	}
	if runAsNonRoot != nil && !*runAsNonRoot {
		root = append(root, "runAsNonRoot false")
	}
	return root
}
