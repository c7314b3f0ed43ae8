package cli

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// attestedByFlux makes the recorded binding one a Kustomization attests.
func attestedByFlux(b *embedopsv1.ModelCacheBinding) {
	b.Spec.Source.Method = embedopsv1.SourceFlux
	b.Spec.Source.ObjectRef = &embedopsv1.SourceObjectReference{
		APIVersion: "kustomize.toolkit.fluxcd.io/v1", Kind: "Kustomization", Namespace: "flux-system", Name: "apps",
	}
}

func TestAuditSaysWhetherTheRevisionIsAttestedOrDeclared(t *testing.T) {
	g := NewWithT(t)
	repo, commit := commitServer(t)
	declared := recordedBinding(t, commit, func(*embedopsv1.ModelCacheBinding) {})
	out, _, err := runCLI("", "audit", "-f", declared, "--repo", repo)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`BINDING\s+RESULT\s+SOURCE\s+RECORDED`))
	g.Expect(out).To(MatchRegexp(`Verified\s+Declared\s+` + commit[:12]))

	attested := recordedBinding(t, commit, attestedByFlux)
	out, _, err = runCLI("", "audit", "-f", attested, "--repo", repo, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`"attestation": "Attested"`))
	g.Expect(out).To(ContainSubstring(`"attestedBy": "Kustomization flux-system/apps"`))
}

func TestAuditGatesFailOnDeclaredOrUnverifiedBindings(t *testing.T) {
	repo, commit := commitServer(t)
	missing := "0123456789abcdef0123456789abcdef01234567"
	cases := []struct {
		name    string
		commit  string
		tamper  func(*embedopsv1.ModelCacheBinding)
		flags   []string
		wantErr error
	}{
		{name: "declared, attestation required", commit: commit, tamper: func(*embedopsv1.ModelCacheBinding) {}, flags: []string{"--require-attested"}, wantErr: ErrNotAttested},
		{name: "unknown source, attestation required", commit: commit, tamper: func(b *embedopsv1.ModelCacheBinding) {
			b.Spec.Source = embedopsv1.DecisionSource{Method: embedopsv1.SourceUnknown}
		}, flags: []string{"--require-attested"}, wantErr: ErrNotAttested},
		{name: "attested and verified", commit: commit, tamper: attestedByFlux, flags: []string{"--require-attested", "--require-verified"}},
		{name: "attested, unverifiable, verification required", commit: missing, tamper: attestedByFlux, flags: []string{"--require-verified"}, wantErr: ErrNotVerified},
		{name: "declared without a gate", commit: commit, tamper: func(*embedopsv1.ModelCacheBinding) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			file := recordedBinding(t, tc.commit, tc.tamper)
			_, _, err := runCLI("", append([]string{"audit", "-f", file, "--repo", repo}, tc.flags...)...)
			if tc.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tc.wantErr))
			g.Expect(err.Error()).To(ContainSubstring("models/"), "the error names the binding")
			g.Expect(ExitCode(err)).To(Equal(ExitGate))
		})
	}
}

func TestAuditClonesADeclaredRepositoryOnlyFromAnAllowedHost(t *testing.T) {
	var requests atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.NotFound(w, nil)
	}))
	t.Cleanup(server.Close)
	_, commit := commitServer(t)
	file := recordedBinding(t, commit, func(b *embedopsv1.ModelCacheBinding) { b.Spec.Source.Repository = server.URL + "/fleet.git" })

	g := NewWithT(t)
	out, _, err := runCLI("", "audit", "-f", file, "--cache-dir", t.TempDir(), "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`"result": "Unverifiable"`))
	g.Expect(out).To(ContainSubstring("is on 127.0.0.1, which no Flux source or Argo CD Application of the cluster uses and which is not allowed"))
	g.Expect(requests.Load()).To(BeZero(), "a host neither the cluster nor the user allows is never asked")

	out, _, err = runCLI("", "audit", "-f", file, "--cache-dir", t.TempDir(), "-o", "json", "--allow-declared-host", "127.0.0.1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("opening the repository"), "the allowed host is cloned from")
	g.Expect(requests.Load()).NotTo(BeZero())
}

func TestAuditRefusesAnAllowedHostThatIsAURL(t *testing.T) {
	g := NewWithT(t)
	_, _, err := runCLI("", "audit", "-f", "x.yaml", "--allow-declared-host", "https://git.example.com/fleet.git")
	g.Expect(IsUsageError(err)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("give a host name")))
}
