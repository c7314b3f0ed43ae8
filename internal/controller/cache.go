package controller

import (
	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
)

// cacheOf is where a server's model cache lives, from its decision and its
// binding's storage names (decision.StorageName): the Shared claim named
// after the storage, or a PerReplica claim template named by the decision
// digest and the binding's suffix, or the one a successor took over. The
// binding owns the claims' lifetime. A PerReplica cache is filled by the
// populate init container when populatorImage is set.
func cacheOf(d *decision.Decision, binding *embedopsv1.ModelCacheBinding, populatorImage string) *builder.Cache {
	storage := decision.StorageName(binding)
	if claim := d.Decision.ExistingClaim; claim != "" {
		return &builder.Cache{Mode: embedopsv1.CacheModeShared, Binding: storage, ClaimName: claim, Existing: true, PopulatorImage: populatorImage}
	}
	if d.Decision.Mode == embedopsv1.CacheModeShared {
		return &builder.Cache{Mode: embedopsv1.CacheModeShared, Binding: storage, ClaimName: storage, PopulatorImage: populatorImage}
	}
	return &builder.Cache{
		Mode:             embedopsv1.CacheModePerReplica,
		Binding:          storage,
		TemplateName:     decision.ClaimTemplateNameFor(binding),
		StorageClassName: d.Decision.StorageClassName,
		Size:             d.Decision.Size.DeepCopy(),
		AccessModes:      d.Decision.AccessModes,
		PopulatorImage:   populatorImage,
	}
}
