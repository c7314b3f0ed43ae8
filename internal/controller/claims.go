package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
)

// untrackPatches plan the removal of the GitOps tracking keys
// (builder.TrackingKeys) from the labels of the binding's claims. Claims
// made before claim templates left them out carry
// app.kubernetes.io/instance=<server> and no owner, which Argo CD's label
// tracking takes as the Application's own and prunes with it (gitops-engine
// v0.7.3 pkg/cache/cluster.go). A claim without them is not written, so
// this costs nothing at rest; the act step writes them (untrackClaims).
func untrackPatches(binding *embedopsv1.ModelCacheBinding, claims map[string]*corev1.PersistentVolumeClaim) []claimPatch {
	var patches []claimPatch
	for _, claim := range claims {
		if claim.Labels[embedopsv1.CacheBindingLabel] != decision.StorageName(binding) {
			continue
		}
		if patch := untrackPatch(claim.Labels); patch != nil {
			patches = append(patches, claimPatch{claim: claim, patch: patch})
		}
	}
	return patches
}

// untrackPatch is the JSON merge patch that deletes the tracking keys among
// labels, or nil when there are none.
func untrackPatch(labels map[string]string) []byte {
	remove := map[string]any{}
	for _, key := range builder.TrackingKeys {
		if _, ok := labels[key]; ok {
			remove[key] = nil
		}
	}
	if len(remove) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": remove}})
	return patch
}

// keepLiveSelector gives the desired StatefulSet the live one's selector,
// which is immutable (k8s pkg/apis/apps/validation,
// ValidateStatefulSetUpdate: "updates to statefulset spec for fields other
// than ... are forbidden"): a StatefulSet made by a release before
// builder.StatefulSetSelectorLabels keeps selecting by
// app.kubernetes.io/instance, and its claims are mended by untrackPatches,
// rather than every replica being replaced on upgrade.
func keepLiveSelector(desired, live *appsv1.StatefulSet) {
	if live == nil || live.Spec.Selector == nil {
		return
	}
	desired.Spec.Selector = live.Spec.Selector.DeepCopy()
}

// keepLiveClaimTemplates gives each desired claim template the live
// StatefulSet's template of the same name, labels and spec, where they
// differ in more than what the API server defaults (volumeMode, the
// template's status phase). Claim templates
// are immutable (k8s pkg/apis/apps/validation, volumeClaimTemplates
// "immutable"), and a template's name carries its storage (the decision
// digest and the binding's suffix), so under one name only two things can
// differ: labels, which the StatefulSet controller never copies to the
// claims it already made (untrackPatches mends those claims instead), and a
// size grown in place by a successor binding (decision.GrowsInPlace), whose
// claims the ledger expands (ExpandClaims). Either would otherwise replace
// the StatefulSet and every pod. A template that differs in defaults only
// stays as built, so the desired children are the same in every reconcile
// (verifiedChildren) and the apply still finds no drift.
func keepLiveClaimTemplates(desired, live *appsv1.StatefulSet) {
	if live == nil {
		return
	}
	for i := range desired.Spec.VolumeClaimTemplates {
		want := &desired.Spec.VolumeClaimTemplates[i]
		index := slices.IndexFunc(live.Spec.VolumeClaimTemplates, func(t corev1.PersistentVolumeClaim) bool { return t.Name == want.Name })
		if index >= 0 && !sameBeyondDefaults(want, &live.Spec.VolumeClaimTemplates[index]) {
			live.Spec.VolumeClaimTemplates[index].DeepCopyInto(want)
		}
	}
}

// sameBeyondDefaults reports whether a built claim template and a live one
// differ only in the fields the API server defaults in a claim template
// (k8s pkg/apis/core/v1/defaults.go SetDefaults_PersistentVolumeClaimSpec:
// volumeMode Filesystem; SetDefaults_PersistentVolumeClaim: status.phase
// Pending).
func sameBeyondDefaults(built, live *corev1.PersistentVolumeClaim) bool {
	defaulted := built.DeepCopy()
	if defaulted.Spec.VolumeMode == nil {
		defaulted.Spec.VolumeMode = new(corev1.PersistentVolumeFilesystem)
	}
	if defaulted.Status.Phase == "" {
		defaulted.Status.Phase = corev1.ClaimPending
	}
	return equality.Semantic.DeepEqual(defaulted.ObjectMeta, live.ObjectMeta) &&
		equality.Semantic.DeepEqual(defaulted.Spec, live.Spec) &&
		equality.Semantic.DeepEqual(defaulted.Status, live.Status)
}

// keepLiveLifecycle leaves a live StatefulSet's TEI container without
// builder.DrainLifecycle when it was made without it (by a release before
// it), and reports whether it did: the pod template would change for it
// alone, and the upgrade would restart every replica of every server. Once
// anything else changes the template, the pods roll anyway and get the
// drain with it (restoreUpgrades); a lifecycle spec.podTemplate sets is
// kept as written.
func keepLiveLifecycle(desired, live *appsv1.StatefulSet) bool {
	if live == nil {
		return false
	}
	want := teiContainer(&desired.Spec.Template)
	have := teiContainer(&live.Spec.Template)
	if want != nil && have != nil && have.Lifecycle == nil && equality.Semantic.DeepEqual(want.Lifecycle, builder.DrainLifecycle()) {
		want.Lifecycle = nil
		return true
	}
	return false
}

// keepLiveLiveness leaves a live StatefulSet's TEI container with the
// liveness probe a release before builder.LivenessProbe gave it (an HTTP
// GET, /health), and reports whether it did, for the reason
// keepLiveLifecycle keeps the missing drain: the probe alone is no reason
// to restart every replica of every server; a roll for another change
// brings it (restoreUpgrades).
func keepLiveLiveness(desired, live *appsv1.StatefulSet) bool {
	if live == nil {
		return false
	}
	want := teiContainer(&desired.Spec.Template)
	have := teiContainer(&live.Spec.Template)
	if want == nil || have == nil || have.LivenessProbe == nil || have.LivenessProbe.HTTPGet == nil ||
		!equality.Semantic.DeepEqual(want.LivenessProbe, builder.LivenessProbe()) ||
		equality.Semantic.DeepEqual(have.LivenessProbe, want.LivenessProbe) {
		// A live StatefulSet that already has this release's probe keeps
		// nothing, so its apply needs no dry run (restoreUpgrades).
		return false
	}
	want.LivenessProbe = have.LivenessProbe.DeepCopy()
	return true
}

// restoreUpgrades gives the desired TEI container back what
// keepLiveLifecycle and keepLiveLiveness kept out (drain, liveness) when
// the rest of the pod template would change the live StatefulSet's anyway,
// which a server-side dry run of the desired StatefulSet tells, API
// defaults included: a roll that restarts the pods for another change
// brings them too. A StatefulSet the API server would refuse in place is
// replaced, with new pods, so it gets them as well.
func (r *EmbeddingServerReconciler) restoreUpgrades(ctx context.Context, server *embedopsv1.EmbeddingServer, desired, live *appsv1.StatefulSet, drain, liveness bool) error {
	asked, err := digestOf(desired.Spec.Template)
	if err != nil {
		return err
	}
	question := upgradeQuestion{statefulSet: live.UID, generation: live.Generation, desired: asked}
	var rolls bool
	if answer, ok := r.upgrades.Load(server.UID); ok && answer.(upgradeAnswer).upgradeQuestion == question {
		rolls = answer.(upgradeAnswer).rolls
	} else {
		if rolls, err = r.rollsAnyway(ctx, server, desired, live); err != nil {
			return err
		}
		r.upgrades.Store(server.UID, upgradeAnswer{upgradeQuestion: question, rolls: rolls})
	}
	container := teiContainer(&desired.Spec.Template)
	if !rolls || container == nil {
		return nil
	}
	if drain {
		container.Lifecycle = builder.DrainLifecycle()
	}
	if liveness {
		container.LivenessProbe = builder.LivenessProbe()
	}
	return nil
}

// upgradeQuestion is what a dry run of restoreUpgrades answers for: the
// live StatefulSet at a generation and the desired pod template, by
// digest. A reconcile that asks the same (every endpoint check of an
// unchanged server) makes no dry run again.
type upgradeQuestion struct {
	statefulSet types.UID
	generation  int64
	desired     string
}

// upgradeAnswer is a server's last upgradeQuestion and its answer.
type upgradeAnswer struct {
	upgradeQuestion
	rolls bool
}

// rollsAnyway dry-runs desired and reports whether its pod template differs
// from live's, or whether the API server refuses it in place.
func (r *EmbeddingServerReconciler) rollsAnyway(ctx context.Context, server *embedopsv1.EmbeddingServer, desired, live *appsv1.StatefulSet) (bool, error) {
	objects, err := childObjects(server, desired.DeepCopy())
	if err != nil {
		return false, err
	}
	probe := objects[0]
	err = r.act.DryRunApply(ctx, probe)
	if apierrors.IsInvalid(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("dry-running the StatefulSet: %w", err)
	}
	applied := &appsv1.StatefulSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(probe.Object, applied); err != nil {
		return false, fmt.Errorf("reading the dry run's StatefulSet: %w", err)
	}
	return !equality.Semantic.DeepEqual(applied.Spec.Template, live.Spec.Template), nil
}

// teiContainer is the template's TEI container, nil when it has none.
func teiContainer(template *corev1.PodTemplateSpec) *corev1.Container {
	for i := range template.Spec.Containers {
		if template.Spec.Containers[i].Name == builder.ContainerName {
			return &template.Spec.Containers[i]
		}
	}
	return nil
}
