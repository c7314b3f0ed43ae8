package controller

import (
	"fmt"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/internal/decision"
)

// cacheFor is where a server's model cache lives, from its cache decision:
// a PerReplica claim template named by the decision digest, the Shared
// claim, or nil (an emptyDir) for mode None. Errors about the spec wrap
// decision.ErrInvalidSpec.
//
// The Shared claim is named after the binding that will own it
// (decision.BindingName); the binding lifecycle creates it.
func cacheFor(server *embedopsv1.EmbeddingServer) (*builder.Cache, error) {
	d, err := decision.For(server)
	if err != nil {
		return nil, fmt.Errorf("deciding the cache: %w", err)
	}
	if d == nil {
		return nil, nil
	}
	switch d.Decision.Mode {
	case embedopsv1.CacheModeShared:
		return &builder.Cache{Mode: embedopsv1.CacheModeShared, ClaimName: decision.BindingName(d)}, nil
	default:
		return &builder.Cache{
			Mode:             embedopsv1.CacheModePerReplica,
			TemplateName:     decision.ClaimTemplateName(d),
			StorageClassName: d.Decision.StorageClassName,
			Size:             d.Decision.Size.DeepCopy(),
			AccessModes:      d.Decision.AccessModes,
		}, nil
	}
}
