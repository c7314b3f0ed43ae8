package controller

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

func TestOwnershipConflictAcceptsOnlyThisServersChildren(t *testing.T) {
	server := &embedopsv1.EmbeddingServer{ObjectMeta: metav1.ObjectMeta{Name: "tei", Namespace: "models", UID: "u1"}}
	ours := map[string]string{embedopsv1.NameLabel: "tei", embedopsv1.NamespaceLabel: "models"}
	controller := func(apiVersion, kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: new(true)}}
	}
	cases := []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		why    string
	}{
		{name: "ours", labels: ours, owners: controller("embedops.dev/v1alpha1", "EmbeddingServer", "tei", "u1")},
		{name: "ours, not yet owned", labels: ours},
		{name: "ours, of an older API version", labels: ours, owners: controller("embedops.dev/v1alpha0", "EmbeddingServer", "tei", "u1")},
		{name: "ours, left by a deleted server of the same name", labels: ours, owners: controller("embedops.dev/v1alpha1", "EmbeddingServer", "tei", "u0")},
		{name: "no labels", why: "it lacks the labels embedops.dev/name=tei and embedops.dev/namespace=models"},
		{name: "another server's", labels: map[string]string{embedopsv1.NameLabel: "other", embedopsv1.NamespaceLabel: "models"}, why: "it lacks the labels"},
		{name: "another namespace's", labels: map[string]string{embedopsv1.NameLabel: "tei", embedopsv1.NamespaceLabel: "dev"}, why: "it lacks the labels"},
		{name: "labelled but controlled by a Deployment", labels: ours, owners: controller("apps/v1", "Deployment", "tei", "d1"), why: "it is controlled by Deployment tei"},
		{name: "labelled but controlled by another server", labels: ours, owners: controller("embedops.dev/v1alpha1", "EmbeddingServer", "other", "u2"), why: "it is controlled by EmbeddingServer other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			existing := &metav1.ObjectMeta{Name: "tei", Namespace: "models", Labels: tc.labels, OwnerReferences: tc.owners}
			why := ownershipConflict(server, existing)
			if tc.why == "" {
				g.Expect(why).To(BeEmpty())
				return
			}
			g.Expect(why).To(HavePrefix(tc.why))
		})
	}
}

func TestIsOwnershipConflictSeesThroughWrapping(t *testing.T) {
	conflict := &OwnershipConflictError{Kind: "Service", Namespace: "models", Name: "tei", Why: "it lacks the labels"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"itself", conflict, true},
		{"wrapped", fmt.Errorf("applying: %w", conflict), true},
		{"terminal", reconcile.TerminalError(conflict), true},
		{"other", errors.New("Service models/tei exists and is not owned"), false},
		{"nil", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(IsOwnershipConflict(tc.err)).To(Equal(tc.want))
		})
	}
	NewWithT(t).Expect(conflict.Error()).To(Equal("Service models/tei exists and is not owned by this EmbeddingServer: it lacks the labels"))
}
