package metrics

import (
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

func TestCachedBytesOnlyWhileClaimsHoldThem(t *testing.T) {
	size := int64(90_000_000)
	for _, tc := range []struct {
		name     string
		phase    embedopsv1.BindingPhase
		realized *embedopsv1.RealizedCache
		want     *int64
	}{
		{"active with bytes", embedopsv1.BindingActive, &embedopsv1.RealizedCache{Bytes: &size}, &size},
		{"retiring with bytes", embedopsv1.BindingRetiring, &embedopsv1.RealizedCache{Bytes: &size}, &size},
		{"released", embedopsv1.BindingReleased, &embedopsv1.RealizedCache{Bytes: &size}, nil},
		{"nothing realized", embedopsv1.BindingActive, nil, nil},
		{"realized without bytes", embedopsv1.BindingActive, &embedopsv1.RealizedCache{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			binding := &embedopsv1.ModelCacheBinding{Status: embedopsv1.ModelCacheBindingStatus{Phase: tc.phase, Realized: tc.realized}}
			NewWithT(t).Expect(cachedBytes(binding)).To(Equal(tc.want))
		})
	}
}
