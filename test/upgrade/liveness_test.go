package upgrade

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/embedops/embedops/internal/builder"
)

// intendedRoll returns before as the one intended roll of an upgrade
// leaves it, and whether there is one: a StatefulSet whose TEI container
// has the TCP liveness probe of the releases 672c32b to dfd025a, which
// never restarts a TEI whose backend died, gets builder.LivenessProbe,
// and the StatefulSet controller rolls its pods once for it (a new
// generation and revision). The same roll gives the populate init
// container builder.PruneFlag: from this release `embedops populate`
// prunes only when asked, and the controller asks where it relied on the
// default before. Everything else must stay as compareSnapshots checks
// it; a baseline with the /health probe shows no roll.
func intendedRoll(t *testing.T, name string, before, after *appsv1.StatefulSet) *appsv1.StatefulSet {
	t.Helper()
	was, now := teiContainer(&before.Spec.Template), teiContainer(&after.Spec.Template)
	if was == nil || now == nil || was.LivenessProbe == nil || was.LivenessProbe.TCPSocket == nil ||
		!equality.Semantic.DeepEqual(now.LivenessProbe, builder.LivenessProbe()) {
		return before
	}
	rolled := before.DeepCopy()
	teiContainer(&rolled.Spec.Template).LivenessProbe = builder.LivenessProbe()
	askToPrune(&rolled.Spec.Template)
	rolled.Generation++
	rolled.Status.UpdateRevision = revisionOf(rolled)
	// The roll's write is logged here, not as a write without a change.
	rolled.ResourceVersion = after.ResourceVersion
	t.Logf("StatefulSet %s: the TCP liveness probe becomes the /health one, an intended roll (generation %d -> %d)",
		name, before.Generation, rolled.Generation)
	return rolled
}

// teiContainer is the template's TEI container, nil when it has none.
func teiContainer(template *corev1.PodTemplateSpec) *corev1.Container {
	i := slices.IndexFunc(template.Spec.Containers, func(c corev1.Container) bool { return c.Name == builder.ContainerName })
	if i < 0 {
		return nil
	}
	return &template.Spec.Containers[i]
}

// askToPrune gives the template's populate init container builder.PruneFlag
// before --dir, where the builder writes it, when it lacks it.
func askToPrune(template *corev1.PodTemplateSpec) {
	i := slices.IndexFunc(template.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == builder.PopulateContainerName })
	if i < 0 {
		return
	}
	populate := &template.Spec.InitContainers[i]
	dir := slices.Index(populate.Command, "--dir")
	if dir < 0 || slices.Contains(populate.Command, builder.PruneFlag) {
		return
	}
	populate.Command = slices.Insert(slices.Clone(populate.Command), dir, builder.PruneFlag)
}
