package cleanup

import (
	"testing"
	"time"

	runtimectrl "github.com/fluxcd/pkg/runtime/controller"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/embedops/embedops/internal/controller/watch"
)

func TestLeaseHeld(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration, seconds int32) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: &metav1.MicroTime{Time: now.Add(-renewedAgo)},
		}}
	}
	cases := []struct {
		name  string
		lease *coordinationv1.Lease
		held  bool
	}{
		{"renewed within its duration", lease("controller-0", 5*time.Second, 15), true},
		{"expired", lease("controller-0", 20*time.Second, 15), false},
		{"released (no holder)", lease("", time.Second, 15), false},
		{"never renewed", &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("c")}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, held := leaseHeld(tc.lease, now)
			NewWithT(t).Expect(held).To(Equal(tc.held))
		})
	}
}

func TestIsControllerLease(t *testing.T) {
	shard := watch.ShardLeaderElectionID(runtimectrl.WatchOptions{LabelSelector: "sharding.fluxcd.io/key=shard1"})
	for name, want := range map[string]bool{
		watch.LeaderElectionID:               true,
		shard:                                true,
		watch.LeaderElectionID + "-zz":       false,
		watch.LeaderElectionID + "-0123456z": false,
		"other-controller-leader":            false,
	} {
		NewWithT(t).Expect(isControllerLease(name)).To(Equal(want), name)
	}
}
