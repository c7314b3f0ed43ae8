package controller

import (
	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
)

// cacheOf is where a server's model cache lives, from its decision and the
// name of its binding: the Shared claim named after the binding, or a
// PerReplica claim template named by the decision digest and the binding's
// suffix. The binding owns the claims' lifetime. A PerReplica cache is
// filled by the populate init container when populatorImage is set.
func cacheOf(d *decision.Decision, bindingName, populatorImage string) *builder.Cache {
	if d.Decision.Mode == embedopsv1.CacheModeShared {
		return &builder.Cache{Mode: embedopsv1.CacheModeShared, Binding: bindingName, ClaimName: bindingName, PopulatorImage: populatorImage}
	}
	return &builder.Cache{
		Mode:             embedopsv1.CacheModePerReplica,
		Binding:          bindingName,
		TemplateName:     decision.ClaimTemplateNameOf(d, bindingName),
		StorageClassName: d.Decision.StorageClassName,
		Size:             d.Decision.Size.DeepCopy(),
		AccessModes:      d.Decision.AccessModes,
		PopulatorImage:   populatorImage,
	}
}
