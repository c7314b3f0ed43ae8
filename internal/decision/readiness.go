package decision

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// Readiness is a condition's status, reason and message.
type Readiness struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// CacheReadiness is the server's CacheReady condition that a binding and its
// claims (by name) support: Bound when Active with every claim Bound (or
// with an existing claim, which the server checked before binding),
// Pending otherwise, BindingRetiring once the binding left Active.
func CacheReadiness(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) Readiness {
	if !IsActive(binding) {
		return Readiness{metav1.ConditionFalse, embedopsv1.BindingRetiringReason, fmt.Sprintf("binding %s is %s", binding.Name, binding.Status.Phase)}
	}
	if existing := binding.Spec.Decision.ExistingClaim; existing != "" {
		// The server checks the claim is Bound before it binds.
		return Readiness{metav1.ConditionTrue, embedopsv1.BoundReason, fmt.Sprintf("binding %s records existing claim %s, which it does not own", binding.Name, existing)}
	}
	bound, total := boundClaims(binding, claims)
	message := fmt.Sprintf("binding %s: %d/%d claims bound", binding.Name, bound, total) + growingNote(binding, claims) + seedNote(binding, claims)
	if bound < total {
		return Readiness{metav1.ConditionFalse, embedopsv1.PendingReason, message}
	}
	return Readiness{metav1.ConditionTrue, embedopsv1.BoundReason, message}
}

// BindingReadiness is the binding's own Ready condition (kstatus): True when
// Active with every claim Bound, False while claims are pending, Retiring
// (the ledger then also sets Reconciling) or Released.
func BindingReadiness(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) Readiness {
	switch binding.Status.Phase {
	case embedopsv1.BindingRetiring:
		return Readiness{metav1.ConditionFalse, embedopsv1.RetiringReason, "deleting the claims: " + strings.Join(binding.Spec.Resources.PersistentVolumeClaimNames, ", ")}
	case embedopsv1.BindingReleased:
		if HandingOver(binding) {
			return Readiness{metav1.ConditionFalse, embedopsv1.SupersededReason, fmt.Sprintf("superseded by %s, which holds the claims; this binding is an audit record", binding.Status.SupersededBy)}
		}
		return Readiness{metav1.ConditionFalse, embedopsv1.ReleasedReason, "the cached data was released; this binding is an audit record"}
	}
	bound, total := boundClaims(binding, claims)
	// The resize note is part of the message, so the end of a resize
	// changes Ready, which the servers using the binding watch.
	message := fmt.Sprintf("%d/%d claims bound", bound, total) + growingNote(binding, claims)
	if bound < total {
		return Readiness{metav1.ConditionFalse, embedopsv1.PendingReason, message}
	}
	return Readiness{metav1.ConditionTrue, embedopsv1.BoundReason, message}
}

// growingNote is "; N expanding in place to SIZE" while ClaimsGrowing
// counts any, else empty.
func growingNote(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) string {
	if growing := ClaimsGrowing(binding, claims); growing > 0 {
		return fmt.Sprintf("; %d expanding in place to %s", growing, binding.Spec.Decision.Size.String())
	}
	return ""
}

// seedNotesShown bounds the claims seedNote names.
const seedNotesShown = 3

// seedNote is "; " and, for each recorded fill of a claim not bound yet,
// what it is made from or why it downloads instead (at most
// seedNotesShown, then how many more), else empty.
func seedNote(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) string {
	var notes []string
	for _, fill := range binding.Status.ClaimFills {
		if claim, ok := claims[fill.Name]; ok && claim.Status.Phase == corev1.ClaimBound {
			continue
		}
		switch {
		case fill.Fallback != "":
			notes = append(notes, fmt.Sprintf("claim %s downloads from the hub: %s", fill.Name, fill.Fallback))
		case fill.Method == embedopsv1.ClaimFilledBySnapshot:
			notes = append(notes, fmt.Sprintf("claim %s restores VolumeSnapshot %s", fill.Name, fill.Source))
		case fill.Method == embedopsv1.ClaimFilledByClone:
			notes = append(notes, fmt.Sprintf("claim %s is a clone of claim %s", fill.Name, fill.Source))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	if more := len(notes) - seedNotesShown; more > 0 {
		notes = append(notes[:seedNotesShown], fmt.Sprintf("%d more", more))
	}
	return "; " + strings.Join(notes, "; ")
}

// ClaimsGrowing counts the binding's Bound claims, its own, whose request
// reaches the decided size but whose reported capacity does not yet: a
// resize in progress (the CSI resizer and the kubelet report the new
// capacity when done). A claim that reports no capacity is not counted.
func ClaimsGrowing(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) int {
	size := binding.Spec.Decision.Size
	if binding.Spec.Decision.ExistingClaim != "" || size.IsZero() {
		return 0
	}
	growing := 0
	for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
		claim, ok := claims[name]
		if !ok || claim.Status.Phase != corev1.ClaimBound || ClaimOwnership(binding, claim) != "" {
			continue
		}
		request := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		capacity, reported := claim.Status.Capacity[corev1.ResourceStorage]
		if reported && request.Cmp(size) >= 0 && capacity.Cmp(size) < 0 {
			growing++
		}
	}
	return growing
}

// boundClaims counts the binding's claims that are Bound.
func boundClaims(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) (int, int) {
	names := binding.Spec.Resources.PersistentVolumeClaimNames
	bound := 0
	for _, name := range names {
		if claim, ok := claims[name]; ok && claim.Status.Phase == corev1.ClaimBound {
			bound++
		}
	}
	return bound, len(names)
}

// ClaimOwnership says why a claim named in a binding is not the binding's to
// delete, or "" when it is: never the existing claim it records; else when
// controlled by the binding (Shared), labelled with its storage name (PerReplica claim templates carry
// embedopsv1.CacheBindingLabel; a successor's are its predecessor's), or,
// for claims made before that label, carrying the owner labels of the
// server whose PerReplica sharing domain the binding records.
func ClaimOwnership(binding *embedopsv1.ModelCacheBinding, claim metav1.Object) string {
	if existing := binding.Spec.Decision.ExistingClaim; existing != "" && claim.GetName() == existing {
		return "it is the existingClaim its user filled; the binding records it and never deletes it"
	}
	if controller := metav1.GetControllerOfNoCopy(claim); controller != nil {
		if controller.UID == binding.UID {
			return ""
		}
		return fmt.Sprintf("it is controlled by %s %s", controller.Kind, controller.Name)
	}
	labels := claim.GetLabels()
	if label := labels[embedopsv1.CacheBindingLabel]; label == binding.Name || label == StorageName(binding) {
		return ""
	}
	server := labels[embedopsv1.NamespaceLabel] + "/" + labels[embedopsv1.NameLabel]
	if _, hasBindingLabel := labels[embedopsv1.CacheBindingLabel]; !hasBindingLabel &&
		binding.Spec.Decision.Mode == embedopsv1.CacheModePerReplica && binding.Spec.Identity.SharingDomain == server {
		return ""
	}
	return fmt.Sprintf("it carries neither an owner reference to binding %s nor the label %s=%s", binding.Name, embedopsv1.CacheBindingLabel, StorageName(binding))
}
