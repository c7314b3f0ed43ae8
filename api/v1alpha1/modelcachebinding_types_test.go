package v1alpha1_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

var (
	digestA = "sha256:" + strings.Repeat("a", 64)
	digestB = "sha256:" + strings.Repeat("b", 64)
	commitA = strings.Repeat("1", 40)
	commitB = strings.Repeat("2", 40)
)

// binding returns a valid binding, changed by the given modifiers.
func binding(namespace string, modify ...func(*embedopsv1.ModelCacheBinding)) *embedopsv1.ModelCacheBinding {
	b := &embedopsv1.ModelCacheBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: namespace},
		Spec: embedopsv1.ModelCacheBindingSpec{
			Identity: embedopsv1.CacheIdentity{Model: "BAAI/bge-small-en-v1.5", Revision: "main", SharingDomain: namespace, Key: digestA},
			Decision: embedopsv1.CacheDecision{
				Mode:          embedopsv1.CacheModeShared,
				Size:          resource.MustParse("10Gi"),
				AccessModes:   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				ReclaimPolicy: embedopsv1.ReclaimPolicyRetain,
				RetainFor:     metav1.Duration{Duration: 24 * 60 * 60 * 1e9},
				Digest:        digestB,
			},
			Source: embedopsv1.DecisionSource{
				Method: embedopsv1.SourceFlux, Revision: "main@sha1:" + commitA, Commit: commitA,
				DecidedAt: metav1.Now(),
			},
			Resources: embedopsv1.CacheResources{PersistentVolumeClaimNames: []string{"cache-0"}},
		},
	}
	for _, m := range modify {
		m(b)
	}
	return b
}

func TestModelCacheBindingRefusesInvalidSpecs(t *testing.T) {
	namespace := harness.Namespace(t, env.Client)
	cases := []struct {
		name    string
		modify  func(*embedopsv1.ModelCacheBinding)
		message string
	}{
		{"reclaim policy Delete", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Decision.ReclaimPolicy = "Delete" }, `spec.decision.reclaimPolicy: Unsupported value: "Delete"`},
		{"digest not sha256", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Decision.Digest = "md5:abc" }, "spec.decision.digest in body should match"},
		{"duplicate access modes", func(b *embedopsv1.ModelCacheBinding) {
			b.Spec.Decision.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteMany}
		}, "spec.decision.accessModes[1]: Duplicate value"},
		{"no cache is not a decision", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Decision.Mode = embedopsv1.CacheModeNone }, "decision.mode must be PerReplica or Shared"},
		{"flux source without revision", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Source.Revision = "" }, "source.revision is required unless the method is Unknown"},
		{"commit not a sha", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Source.Commit = "HEAD" }, "spec.source.commit in body should match"},
		{"duplicate claim names", func(b *embedopsv1.ModelCacheBinding) {
			b.Spec.Resources.PersistentVolumeClaimNames = []string{"c", "c"}
		}, "spec.resources.persistentVolumeClaimNames[1]: Duplicate value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(t.Context(), binding(namespace, tc.modify))
			g.Expect(err).To(HaveOccurred(), "the API server accepted an invalid binding")
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func TestModelCacheBindingSpecIsImmutable(t *testing.T) {
	g := NewWithT(t)
	b := binding(harness.Namespace(t, env.Client))
	g.Expect(env.Client.Create(t.Context(), b)).To(Succeed())

	cases := []struct {
		name    string
		modify  func(*embedopsv1.ModelCacheBinding)
		message string
	}{
		{"identity", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Identity.Revision = "v2" }, "spec.identity is immutable"},
		{"decision", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Decision.Size = resource.MustParse("20Gi") }, "spec.decision is immutable"},
		{"source", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Source.Commit = commitB }, "spec.source is immutable"},
		{"render inputs", func(b *embedopsv1.ModelCacheBinding) {
			b.Spec.Source.Render = &embedopsv1.RenderInputs{Spec: `{"path":"./other"}`}
		}, "spec.source is immutable"},
		{"claim removed", func(b *embedopsv1.ModelCacheBinding) { b.Spec.Resources.PersistentVolumeClaimNames = nil }, "may be added to, never removed from"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			changed := b.DeepCopy()
			tc.modify(changed)
			err := env.Client.Update(t.Context(), changed)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}

	grown := b.DeepCopy()
	grown.Spec.Resources.PersistentVolumeClaimNames = append(grown.Spec.Resources.PersistentVolumeClaimNames, "cache-1")
	g.Expect(env.Client.Update(t.Context(), grown)).To(Succeed(), "adding a claim name must be allowed")
}

// setStatus writes the status of b with an update, keeping resourceVersion
// preconditions.
func setStatus(t *testing.T, b *embedopsv1.ModelCacheBinding, modify func(*embedopsv1.ModelCacheBindingStatus)) error {
	t.Helper()
	modify(&b.Status)
	return env.Client.Status().Update(t.Context(), b)
}

func TestModelCacheBindingPhaseOnlyMovesForward(t *testing.T) {
	g := NewWithT(t)
	b := binding(harness.Namespace(t, env.Client))
	g.Expect(env.Client.Create(t.Context(), b)).To(Succeed())
	phase := func(p embedopsv1.BindingPhase) func(*embedopsv1.ModelCacheBindingStatus) {
		return func(s *embedopsv1.ModelCacheBindingStatus) { s.Phase = p }
	}
	const backwards = "status.phase only moves Active -> Retiring -> Released"

	g.Expect(setStatus(t, b, phase(embedopsv1.BindingActive))).To(Succeed())
	g.Expect(setStatus(t, b.DeepCopy(), phase(embedopsv1.BindingReleased))).To(MatchError(ContainSubstring(backwards)), "Active must not skip Retiring")
	g.Expect(setStatus(t, b.DeepCopy(), phase(""))).To(MatchError(ContainSubstring("status.phase cannot be removed")))
	g.Expect(setStatus(t, b, phase(embedopsv1.BindingRetiring))).To(Succeed())
	g.Expect(setStatus(t, b.DeepCopy(), phase(embedopsv1.BindingActive))).To(MatchError(ContainSubstring(backwards)), "Retiring must not be revived")
	g.Expect(setStatus(t, b, phase(embedopsv1.BindingReleased))).To(Succeed())
	g.Expect(setStatus(t, b.DeepCopy(), phase(embedopsv1.BindingRetiring))).To(MatchError(ContainSubstring(backwards)))
	g.Expect(setStatus(t, b.DeepCopy(), phase(embedopsv1.BindingActive))).To(MatchError(ContainSubstring(backwards)))
}

func TestModelCacheBindingRealizedFieldsAreImmutableOnceSet(t *testing.T) {
	g := NewWithT(t)
	b := binding(harness.Namespace(t, env.Client))
	g.Expect(env.Client.Create(t.Context(), b)).To(Succeed())
	g.Expect(setStatus(t, b, func(s *embedopsv1.ModelCacheBindingStatus) {
		s.Phase = embedopsv1.BindingActive
		s.Realized = &embedopsv1.RealizedCache{ResolvedCommit: commitA}
	})).To(Succeed())
	g.Expect(setStatus(t, b, func(s *embedopsv1.ModelCacheBindingStatus) {
		s.Realized.ContentDigest = digestA
		s.Realized.PersistentVolumeNames = []string{"pv-1"}
		s.Realized.Files = []string{"config.json", "model.safetensors", "tokenizer.json"}
		s.Realized.Bytes = new(int64(90_000_000))
	})).To(Succeed(), "fields still unset may be filled in")

	cases := []struct {
		name    string
		modify  func(*embedopsv1.RealizedCache)
		message string
	}{
		{"resolved commit changed", func(r *embedopsv1.RealizedCache) { r.ResolvedCommit = commitB }, "resolvedCommit is immutable once set"},
		{"resolved commit cleared", func(r *embedopsv1.RealizedCache) { r.ResolvedCommit = "" }, "resolvedCommit is immutable once set"},
		{"content digest changed", func(r *embedopsv1.RealizedCache) { r.ContentDigest = digestB }, "contentDigest is immutable once set"},
		{"volumes changed", func(r *embedopsv1.RealizedCache) { r.PersistentVolumeNames = []string{"pv-2"} }, "persistentVolumeNames is immutable once set"},
		{"files changed", func(r *embedopsv1.RealizedCache) {
			r.Files = []string{"config.json", "pytorch_model.bin", "tokenizer.json"}
		}, "files is immutable once set"},
		{"files cleared", func(r *embedopsv1.RealizedCache) { r.Files = nil }, "files is immutable once set"},
		{"bytes changed", func(r *embedopsv1.RealizedCache) { r.Bytes = new(int64(1)) }, "bytes is immutable once set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changed := b.DeepCopy()
			err := setStatus(t, changed, func(s *embedopsv1.ModelCacheBindingStatus) { tc.modify(s.Realized) })
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.message)))
		})
	}
	err := setStatus(t, b.DeepCopy(), func(s *embedopsv1.ModelCacheBindingStatus) { s.Realized = nil })
	g.Expect(err).To(MatchError(ContainSubstring("status.realized cannot be removed")))
}

func reference(name string) embedopsv1.RequestReference {
	return embedopsv1.RequestReference{Kind: embedopsv1.EmbeddingServerKind, Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}
}

func TestModelCacheBindingRefusesDuplicateReferenceUIDs(t *testing.T) {
	g := NewWithT(t)
	b := binding(harness.Namespace(t, env.Client))
	g.Expect(env.Client.Create(t.Context(), b)).To(Succeed())
	twin := reference("a")
	twin.Name = "b"
	err := setStatus(t, b, func(s *embedopsv1.ModelCacheBindingStatus) {
		s.Phase = embedopsv1.BindingActive
		s.RequestReferences = []embedopsv1.RequestReference{reference("a"), twin}
	})
	g.Expect(err).To(MatchError(ContainSubstring("status.requestReferences[1]: Duplicate value")))
}

func TestModelCacheBindingReferencesFromTwoAppliersBothSurvive(t *testing.T) {
	g := NewWithT(t)
	b := binding(harness.Namespace(t, env.Client))
	g.Expect(env.Client.Create(t.Context(), b)).To(Succeed())

	for _, name := range []string{"a", "b"} {
		ref := reference(name)
		patch := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": embedopsv1.GroupVersion.String(),
			"kind":       embedopsv1.ModelCacheBindingKind,
			"metadata":   map[string]any{"name": b.Name, "namespace": b.Namespace},
			"status": map[string]any{
				"phase": string(embedopsv1.BindingActive),
				"requestReferences": []any{map[string]any{
					"kind": ref.Kind, "namespace": ref.Namespace, "name": ref.Name, "uid": string(ref.UID),
				}},
			},
		}}
		applied := client.ApplyConfigurationFromUnstructured(patch)
		g.Expect(env.Client.Status().Apply(t.Context(), applied, client.FieldOwner("applier-"+name), client.ForceOwnership)).To(Succeed())
	}

	got := &embedopsv1.ModelCacheBinding{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(got.Status.RequestReferences).To(ConsistOf(reference("a"), reference("b")))
}
