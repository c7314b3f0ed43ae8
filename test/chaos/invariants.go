package chaos

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// Snapshot is the embedops state of one namespace, read from the API
// server. Its three lists are read one after another: take it once the
// namespace is quiet.
type Snapshot struct {
	Servers  []embedopsv1.EmbeddingServer
	Bindings []embedopsv1.ModelCacheBinding
	Claims   []corev1.PersistentVolumeClaim
}

// TakeSnapshot lists the servers, bindings and claims of namespace.
func TakeSnapshot(ctx context.Context, c client.Reader, namespace string) (*Snapshot, error) {
	var servers embedopsv1.EmbeddingServerList
	var bindings embedopsv1.ModelCacheBindingList
	var claims corev1.PersistentVolumeClaimList
	for _, list := range []client.ObjectList{&servers, &bindings, &claims} {
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("taking a snapshot of %s: %w", namespace, err)
		}
	}
	return &Snapshot{Servers: servers.Items, Bindings: bindings.Items, Claims: claims.Items}, nil
}

// Check runs every invariant on the snapshot and returns the violations.
func Check(s *Snapshot) []string {
	var violations []string
	for _, check := range []func(*Snapshot) []string{
		OneActiveBindingPerServer, NoStaleReferences, NoDuplicateActiveBindings, NoStuckDeletions, ReleasedBindingsHoldNoClaims,
	} {
		violations = append(violations, check(s)...)
	}
	return violations
}

// OneActiveBindingPerServer checks that each server with a cache is
// referenced by exactly one binding, Active, recording the server's current
// decision and named by its status.cacheBinding; a server without a cache
// by none.
func OneActiveBindingPerServer(s *Snapshot) []string {
	var violations []string
	for i := range s.Servers {
		server := &s.Servers[i]
		if server.DeletionTimestamp != nil {
			continue // NoStuckDeletions reports it
		}
		referencing := bindingsReferencing(s.Bindings, server.UID)
		d, err := decision.For(server)
		switch {
		case err != nil:
			violations = append(violations, fmt.Sprintf("server %s: no decision: %v", server.Name, err))
		case d == nil && len(referencing) > 0:
			violations = append(violations, fmt.Sprintf("server %s has no cache but is referenced by %s", server.Name, names(referencing)))
		case d != nil && len(referencing) != 1:
			violations = append(violations, fmt.Sprintf("server %s is referenced by %d bindings %s, want 1", server.Name, len(referencing), names(referencing)))
		case d != nil:
			violations = append(violations, checkServerBinding(server, referencing[0], d)...)
		}
	}
	return violations
}

// checkServerBinding checks the one binding referencing a server.
func checkServerBinding(server *embedopsv1.EmbeddingServer, binding *embedopsv1.ModelCacheBinding, d *decision.Decision) []string {
	var violations []string
	if !isActive(binding) {
		violations = append(violations, fmt.Sprintf("server %s is referenced by binding %s, which is %s", server.Name, binding.Name, binding.Status.Phase))
	}
	if binding.Spec.Identity.Key != d.Identity.Key || binding.Spec.Decision.Digest != d.Decision.Digest {
		violations = append(violations, fmt.Sprintf("server %s uses binding %s of another decision", server.Name, binding.Name))
	}
	if server.Status.CacheBinding != binding.Name {
		violations = append(violations, fmt.Sprintf("server %s reports binding %q but is referenced by %s", server.Name, server.Status.CacheBinding, binding.Name))
	}
	return violations
}

// NoStaleReferences checks that bindings reference live servers only: a
// reference to a deleted server keeps its binding from ever retiring.
func NoStaleReferences(s *Snapshot) []string {
	live := map[types.UID]bool{}
	for _, server := range s.Servers {
		live[server.UID] = true
	}
	var violations []string
	for _, binding := range s.Bindings {
		for _, ref := range binding.Status.RequestReferences {
			if !live[ref.UID] {
				violations = append(violations, fmt.Sprintf("binding %s references server %s (%s), which no longer exists", binding.Name, ref.Name, ref.UID))
			}
		}
	}
	return violations
}

// NoDuplicateActiveBindings checks that a decision has at most one Active
// binding.
func NoDuplicateActiveBindings(s *Snapshot) []string {
	byDecision := map[string][]*embedopsv1.ModelCacheBinding{}
	for i := range s.Bindings {
		binding := &s.Bindings[i]
		if isActive(binding) {
			key := binding.Spec.Identity.Key + "/" + binding.Spec.Decision.Digest
			byDecision[key] = append(byDecision[key], binding)
		}
	}
	var violations []string
	for _, bindings := range byDecision {
		if len(bindings) > 1 {
			violations = append(violations, fmt.Sprintf("bindings %s are Active for the same decision", names(bindings)))
		}
	}
	slices.Sort(violations)
	return violations
}

// NoStuckDeletions checks that nothing deleted is held by a finalizer.
func NoStuckDeletions(s *Snapshot) []string {
	var violations []string
	for _, server := range s.Servers {
		if server.DeletionTimestamp != nil {
			violations = append(violations, fmt.Sprintf("server %s is deleted but held by %v", server.Name, server.Finalizers))
		}
	}
	for _, binding := range s.Bindings {
		if binding.DeletionTimestamp != nil {
			violations = append(violations, fmt.Sprintf("binding %s (%s) is deleted but held by %v", binding.Name, binding.Status.Phase, binding.Finalizers))
		}
	}
	return violations
}

// ReleasedBindingsHoldNoClaims checks that a Released binding's claims are
// gone or listed by the binding in use that its succession chain ends in
// (status.supersededBy, hop by hop: the successor a superseded binding
// handed them to, or that successor's own successor). A claim nobody in
// the chain lists would never be deleted by anyone, and one listed only by
// an unrelated binding would be deleted by the wrong one.
func ReleasedBindingsHoldNoClaims(s *Snapshot) []string {
	claims := map[string]bool{}
	for _, claim := range s.Claims {
		claims[claim.Name] = true
	}
	byName := make(map[string]*embedopsv1.ModelCacheBinding, len(s.Bindings))
	for i := range s.Bindings {
		byName[s.Bindings[i].Name] = &s.Bindings[i]
	}
	var violations []string
	for _, binding := range s.Bindings {
		if binding.Status.Phase != embedopsv1.BindingReleased {
			continue
		}
		for _, name := range binding.Spec.Resources.PersistentVolumeClaimNames {
			if claims[name] && !heldBySuccessor(byName, &binding, name) {
				violations = append(violations, fmt.Sprintf("binding %s is Released but its claim %s exists, listed by no binding in use that succeeds it", binding.Name, name))
			}
		}
	}
	return violations
}

// heldBySuccessor reports whether a binding not Released, reached from
// released by status.supersededBy, lists the claim.
func heldBySuccessor(byName map[string]*embedopsv1.ModelCacheBinding, released *embedopsv1.ModelCacheBinding, claim string) bool {
	seen := map[string]bool{released.Name: true}
	for next := byName[released.Status.SupersededBy]; next != nil && !seen[next.Name]; next = byName[next.Status.SupersededBy] {
		seen[next.Name] = true
		if next.Status.Phase != embedopsv1.BindingReleased {
			return slices.Contains(next.Spec.Resources.PersistentVolumeClaimNames, claim)
		}
	}
	return false
}

// bindingsReferencing returns the bindings that list the server's uid.
func bindingsReferencing(bindings []embedopsv1.ModelCacheBinding, uid types.UID) []*embedopsv1.ModelCacheBinding {
	var referencing []*embedopsv1.ModelCacheBinding
	for i := range bindings {
		if slices.ContainsFunc(bindings[i].Status.RequestReferences, func(ref embedopsv1.RequestReference) bool { return ref.UID == uid }) {
			referencing = append(referencing, &bindings[i])
		}
	}
	return referencing
}

// isActive reports whether a binding is Active (a new one has no phase).
func isActive(binding *embedopsv1.ModelCacheBinding) bool {
	return binding.Status.Phase == "" || binding.Status.Phase == embedopsv1.BindingActive
}

// names lists the bindings' names.
func names(bindings []*embedopsv1.ModelCacheBinding) []string {
	out := make([]string, 0, len(bindings))
	for _, binding := range bindings {
		out = append(out, binding.Name)
	}
	return out
}
