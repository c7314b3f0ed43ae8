package decision_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
	"github.com/embedops/embedops/test/fixtures"
)

// server is an EmbeddingServer as committed to git: schema defaults absent.
func server(mods ...func(*embedopsv1.EmbeddingServer)) *embedopsv1.EmbeddingServer {
	es := fixtures.EmbeddingServer("team-a", "embed")
	for _, mod := range mods {
		mod(es)
	}
	return es
}

// withDefaults fills the fields the API server defaults, with the schema's values.
func withDefaults(es *embedopsv1.EmbeddingServer) { fixtures.WithDefaults()(es) }

func withNamespace(ns string) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { es.Namespace = ns }
}

func withName(name string) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { es.Name = name }
}

func withModel(name string) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { es.Spec.Model.Name = name }
}

func withRevision(rev string) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { es.Spec.Model.Revision = rev }
}

func withMode(mode embedopsv1.CacheMode) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { es.Spec.Cache.Mode = mode }
}

func withStorageClass(class string) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { es.Spec.Cache.StorageClassName = class }
}

func withSize(size string) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { es.Spec.Cache.Size = ptr.To(resource.MustParse(size)) }
}

func withRetainFor(d time.Duration) func(*embedopsv1.EmbeddingServer) {
	return func(es *embedopsv1.EmbeddingServer) { es.Spec.Cache.RetainFor = &metav1.Duration{Duration: d} }
}

// mustDecide returns the decision of es and fails the test on an error or nil.
func mustDecide(g Gomega, es *embedopsv1.EmbeddingServer) *decision.Decision {
	d, err := decision.For(es)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	g.ExpectWithOffset(1, d).NotTo(BeNil())
	return d
}

func TestForFillsSchemaDefaults(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server())
	g.Expect(d.Identity.Model).To(Equal("BAAI/bge-small-en-v1.5"))
	g.Expect(d.Identity.Revision).To(Equal(decision.DefaultRevision))
	g.Expect(d.Identity.SharingDomain).To(Equal("team-a/embed"))
	g.Expect(d.Identity.Key).To(MatchRegexp(`^sha256:[a-f0-9]{64}$`))
	g.Expect(d.Decision.Mode).To(Equal(decision.DefaultMode))
	g.Expect(d.Decision.StorageClassName).To(BeEmpty())
	g.Expect(d.Decision.Size.String()).To(Equal(decision.DefaultSize))
	g.Expect(d.Decision.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}))
	g.Expect(d.Decision.ReclaimPolicy).To(Equal(embedopsv1.ReclaimPolicyRetain))
	g.Expect(d.Decision.RetainFor.Duration).To(Equal(decision.DefaultRetainFor))
	g.Expect(d.Decision.Digest).To(MatchRegexp(`^sha256:[a-f0-9]{64}$`))
	g.Expect(d.Decision.Provisioner).To(BeEmpty())
	g.Expect(d.Decision.StorageClassParametersDigest).To(BeEmpty())
}

func TestForGivesTheSameDigestWithDefaultsFilledOrAbsent(t *testing.T) {
	cases := []struct {
		name string
		mods []func(*embedopsv1.EmbeddingServer)
	}{
		{"every default", []func(*embedopsv1.EmbeddingServer){withDefaults}},
		{"revision", []func(*embedopsv1.EmbeddingServer){withRevision("main")}},
		{"mode", []func(*embedopsv1.EmbeddingServer){withMode(embedopsv1.CacheModePerReplica)}},
		{"size", []func(*embedopsv1.EmbeddingServer){withSize("10Gi")}},
		{"size in another suffix", []func(*embedopsv1.EmbeddingServer){withSize("10240Mi")}},
		{"size in bytes", []func(*embedopsv1.EmbeddingServer){withSize("10737418240")}},
		{"retainFor", []func(*embedopsv1.EmbeddingServer){withRetainFor(24 * time.Hour)}},
		{"retainFor in minutes", []func(*embedopsv1.EmbeddingServer){withRetainFor(1440 * time.Minute)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			absent := mustDecide(g, server())
			filled := mustDecide(g, server(tc.mods...))
			g.Expect(filled.Decision.Digest).To(Equal(absent.Decision.Digest))
			g.Expect(filled.Identity).To(Equal(absent.Identity))
			g.Expect(filled.Decision.Size.String()).To(Equal(absent.Decision.Size.String()))
		})
	}
}

func TestForChangesTheDigestWithEachDecidedField(t *testing.T) {
	cases := []struct {
		name       string
		mod        func(*embedopsv1.EmbeddingServer)
		keyChanges bool
	}{
		{"model", withModel("BAAI/bge-base-en-v1.5"), true},
		{"revision", withRevision("v1.0"), true},
		{"namespace", withNamespace("team-b"), true},
		{"server name (PerReplica)", withName("other"), true},
		{"mode", withMode(embedopsv1.CacheModeShared), true},
		{"storage class", withStorageClass("fast"), false},
		{"size", withSize("20Gi"), false},
		{"size by one byte", withSize("10737418241"), false},
		{"retainFor", withRetainFor(time.Hour), false},
		{"retainFor by a millisecond", withRetainFor(24*time.Hour + time.Millisecond), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			base := mustDecide(g, server())
			changed := mustDecide(g, server(tc.mod))
			g.Expect(changed.Decision.Digest).NotTo(Equal(base.Decision.Digest))
			if tc.keyChanges {
				g.Expect(changed.Identity.Key).NotTo(Equal(base.Identity.Key))
			} else {
				g.Expect(changed.Identity.Key).To(Equal(base.Identity.Key))
			}
		})
	}
}

func TestForIgnoresFieldsOutsideTheDecision(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*embedopsv1.EmbeddingServer)
	}{
		{"image", func(es *embedopsv1.EmbeddingServer) { es.Spec.Image = "tei:gpu" }},
		{"replicas", func(es *embedopsv1.EmbeddingServer) { es.Spec.Replicas = new(int32(3)) }},
		{"port", func(es *embedopsv1.EmbeddingServer) { es.Spec.Port = 9090 }},
		{"args", func(es *embedopsv1.EmbeddingServer) { es.Spec.Args = []string{"--max-batch-tokens=1024"} }},
		{"token secret", func(es *embedopsv1.EmbeddingServer) {
			es.Spec.Model.TokenSecretRef = &embedopsv1.SecretKeyRef{Name: "hf", Key: "token"}
		}},
		{"suspend", func(es *embedopsv1.EmbeddingServer) { es.Spec.Suspend = true }},
		{"labels and annotations", func(es *embedopsv1.EmbeddingServer) {
			es.Labels = map[string]string{"app": "x"}
			es.Annotations = map[string]string{embedopsv1.SourceRevisionAnnotation: "main@sha1:abc"}
		}},
		{"status", func(es *embedopsv1.EmbeddingServer) { es.Status.CacheBinding = "b" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(mustDecide(g, server(tc.mod))).To(Equal(mustDecide(g, server())))
		})
	}
}

func TestForSharingDomain(t *testing.T) {
	cases := []struct {
		name        string
		mods        []func(*embedopsv1.EmbeddingServer)
		domain      string
		accessModes []corev1.PersistentVolumeAccessMode
	}{
		{"PerReplica is the server", nil, "team-a/embed", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
		{"Shared is the namespace", []func(*embedopsv1.EmbeddingServer){withMode(embedopsv1.CacheModeShared)},
			"team-a", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}},
		{"Shared ignores the server name", []func(*embedopsv1.EmbeddingServer){withMode(embedopsv1.CacheModeShared), withName("other")},
			"team-a", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := mustDecide(g, server(tc.mods...))
			g.Expect(d.Identity.SharingDomain).To(Equal(tc.domain))
			g.Expect(d.Decision.AccessModes).To(Equal(tc.accessModes))
		})
	}
}

func TestForSharedServersInANamespaceShareABinding(t *testing.T) {
	g := NewWithT(t)
	a := mustDecide(g, server(withMode(embedopsv1.CacheModeShared), withName("a")))
	b := mustDecide(g, server(withMode(embedopsv1.CacheModeShared), withName("b")))
	g.Expect(b).To(Equal(a))
	g.Expect(decision.BindingName(b)).To(Equal(decision.BindingName(a)))
}

func TestForNoneRecordsNothing(t *testing.T) {
	cases := []struct {
		name string
		mods []func(*embedopsv1.EmbeddingServer)
	}{
		{"None", []func(*embedopsv1.EmbeddingServer){withMode(embedopsv1.CacheModeNone)}},
		{"None without a namespace", []func(*embedopsv1.EmbeddingServer){withMode(embedopsv1.CacheModeNone), withNamespace("")}},
		{"None with defaults filled", []func(*embedopsv1.EmbeddingServer){withDefaults, withMode(embedopsv1.CacheModeNone)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d, err := decision.For(server(tc.mods...))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d).To(BeNil())
		})
	}
}

func TestForRefusesSpecsItCannotDecide(t *testing.T) {
	cases := []struct {
		name    string
		server  *embedopsv1.EmbeddingServer
		message string
	}{
		{"no server", nil, "no server"},
		{"no namespace", server(withNamespace("")), "metadata.namespace is required"},
		{"no namespace (Shared)", server(withNamespace(""), withMode(embedopsv1.CacheModeShared)), "metadata.namespace is required"},
		{"no name (PerReplica)", server(withName("")), "metadata.name is required"},
		{"no model", server(withModel("")), "spec.model.name is required"},
		{"unknown mode", server(withMode("Local")), `unknown spec.cache.mode "Local"`},
		{"zero size", server(withSize("0")), "must be greater than zero"},
		{"negative size", server(withSize("-1Gi")), "must be greater than zero"},
		{"size of 1e19", server(withSize("1e19")), "must be less than 8Ei"},
		{"size of 2^63", server(withSize("9223372036854775808")), "must be less than 8Ei"},
		{"size beyond Ei", server(withSize("1180591620717411303424")), "must be less than 8Ei"},
		{"size with a huge exponent", server(withSize("1e1000000000")), "must be less than 8Ei"},
		{"negative size with a huge exponent", server(withSize("-1e1000000000")), "must be greater than zero"},
		{"negative retainFor", server(withRetainFor(-time.Hour)), "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d, err := decision.For(tc.server)
			g.Expect(err).To(MatchError(decision.ErrInvalidSpec))
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
			g.Expect(d).To(BeNil())
		})
	}
}

func TestForRecordsSizeInCanonicalForm(t *testing.T) {
	cases := []struct {
		written, recorded string
	}{
		{"10Gi", "10Gi"},
		{"10240Mi", "10Gi"},
		{"10737418240", "10Gi"},
		{"0.5Gi", "512Mi"},
		{"1500Mi", "1500Mi"},
		{"10G", "9765625Ki"},
		{"1e3", "1k"},
		{"1000", "1k"},
		{"100m", "100m"},
		{"7Ei", "7Ei"},
		{"9223372036854775807", "9223372036854775807"},
	}
	for _, tc := range cases {
		t.Run(tc.written, func(t *testing.T) {
			g := NewWithT(t)
			d := mustDecide(g, server(withSize(tc.written)))
			g.Expect(d.Decision.Size.String()).To(Equal(tc.recorded))
			g.Expect(d.Decision.Size.Cmp(resource.MustParse(tc.written))).To(BeZero(), "the recorded size has another value")
		})
	}
}

func TestForDoesNotModifyTheServer(t *testing.T) {
	g := NewWithT(t)
	es := server(withSize("10240Mi"))
	before := es.DeepCopy()
	mustDecide(g, es)
	g.Expect(es).To(Equal(before))
}

// An explicit retainFor of 0s decodes to the same metav1.Duration as an
// absent field, so it cannot be honoured until the API field is a pointer.
func TestForKeepsAnExplicitZeroRetainFor(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server(withRetainFor(0)))
	g.Expect(d.Decision.RetainFor.Duration).To(BeZero(), "0s means release at once, not the default")
	absent := server()
	absent.Spec.Cache.RetainFor = nil
	g.Expect(mustDecide(g, absent).Decision.RetainFor.Duration).To(Equal(decision.DefaultRetainFor))
}
