package audit

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

func TestAuditSaysWhoAttestsTheRevision(t *testing.T) {
	repo := newGitops(t)
	kustomization := &embedopsv1.SourceObjectReference{APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: "flux-system", Name: "apps"}
	application := &embedopsv1.SourceObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Namespace: "argocd", Name: "models"}
	cases := []struct {
		name       string
		method     embedopsv1.SourceMethod
		ref        *embedopsv1.SourceObjectReference
		want       Attestation
		attestedBy string
	}{
		{name: "a Kustomization's status", method: embedopsv1.SourceFlux, ref: kustomization, want: Attested, attestedBy: "Kustomization flux-system/apps"},
		{name: "an Application's status", method: embedopsv1.SourceArgoCD, ref: application, want: Attested, attestedBy: "Application argocd/models"},
		{name: "an annotation", method: embedopsv1.SourceDeclared, want: Declared},
		{name: "a tool's method naming no object", method: embedopsv1.SourceFlux, want: Unattested},
		{name: "no revision", method: embedopsv1.SourceUnknown, ref: application, want: Unattested},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			binding := bindingFor(t, prodServer("10Gi"), repo.commits[4], withSource(func(src *embedopsv1.DecisionSource) {
				src.Method, src.ObjectRef = tc.method, tc.ref
			}))
			res := Audit(context.Background(), repo.repo, binding, Options{})
			g.Expect(res.Attestation).To(Equal(tc.want))
			g.Expect(res.AttestedBy).To(Equal(tc.attestedBy))
			if tc.method != embedopsv1.SourceUnknown {
				g.Expect(res.Result).To(Equal(Verified), "attestation says who vouches, the verdict what renders: %s", res.Reason)
			}
		})
	}
}

func TestNotAttestedListsDeclaredAndUnattestedResults(t *testing.T) {
	g := NewWithT(t)
	results := []Result{
		{Binding: "a/flux", Attestation: Attested},
		{Binding: "a/annotated", Attestation: Declared},
		{Binding: "a/unknown", Attestation: Unattested},
	}
	g.Expect(NotAttested(results)).To(HaveExactElements(HaveField("Binding", "a/annotated"), HaveField("Binding", "a/unknown")))
	g.Expect(NotAttested(results[:1])).To(BeEmpty())
}
