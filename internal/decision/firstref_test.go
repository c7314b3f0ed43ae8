package decision_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

func TestFirstReferenceWindowIsTheCreatorsFirstStorageOnly(t *testing.T) {
	created := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	const uid, wait = types.UID("server-uid"), 5 * time.Minute
	awaiting := func(change func(*embedopsv1.ModelCacheBinding)) *embedopsv1.ModelCacheBinding {
		b := &embedopsv1.ModelCacheBinding{ObjectMeta: metav1.ObjectMeta{
			Name: "b", CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{embedopsv1.ServerUIDLabel: string(uid)},
		}}
		b.Spec.Decision.Mode = embedopsv1.CacheModePerReplica
		if change != nil {
			change(b)
		}
		return b
	}
	cases := []struct {
		name    string
		binding *embedopsv1.ModelCacheBinding
		inUse   string
		wait    time.Duration
		now     time.Time
		want    time.Duration
	}{
		{"a new server's first storage waits the rest of the window", awaiting(nil), "", wait, created.Add(time.Minute), 4 * time.Minute},
		{"its own binding in use waits too", awaiting(nil), "b", wait, created.Add(time.Minute), 4 * time.Minute},
		{"past the window, at once", awaiting(nil), "", wait, created.Add(6 * time.Minute), 0},
		{"no window configured, at once", awaiting(nil), "", 0, created, 0},
		{"a server moving from other storage, at once", awaiting(nil), "old", wait, created, 0},
		{"another server's binding, at once", awaiting(func(b *embedopsv1.ModelCacheBinding) { b.Labels[embedopsv1.ServerUIDLabel] = "other" }), "", wait, created, 0},
		{"a Shared binding, at once: its claim comes after the first status", awaiting(func(b *embedopsv1.ModelCacheBinding) {
			b.Spec.Decision.Mode = embedopsv1.CacheModeShared
		}), "", wait, created, 0},
		{"a successor, at once: its claims are bound", awaiting(func(b *embedopsv1.ModelCacheBinding) { b.Spec.Supersedes = "a" }), "", wait, created, 0},
		{"a first status already written, at once", awaiting(func(b *embedopsv1.ModelCacheBinding) { b.Status.Phase = embedopsv1.BindingActive }), "", wait, created, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(decision.FirstReferenceWindow(tc.binding, uid, tc.inUse, tc.wait, tc.now)).To(Equal(tc.want))
		})
	}
}
