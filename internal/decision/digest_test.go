package decision_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

const digestPattern = `^sha256:[a-f0-9]{64}$`

// sha256Of is the digest of a literal encoding.
func sha256Of(encoding string) string {
	sum := sha256.Sum256([]byte(encoding))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestEncodingIsVersion1(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server())

	key := sha256Of("24:embedops.dev/identity/v1," +
		"5:model,22:BAAI/bge-small-en-v1.5," +
		"8:revision,4:main," +
		"13:sharingDomain,12:team-a/embed,")
	g.Expect(d.Identity.Key).To(Equal(key))

	digest := sha256Of("24:embedops.dev/decision/v1," +
		"5:model,22:BAAI/bge-small-en-v1.5," +
		"8:revision,4:main," +
		"13:sharingDomain,12:team-a/embed," +
		"3:key,71:" + key + "," +
		"4:mode,10:PerReplica," +
		"16:storageClassName,0:," +
		"4:size,11:10737418240," +
		"11:accessModes,1:1,13:ReadWriteOnce," +
		"13:reclaimPolicy,6:Retain," +
		"9:retainFor,7:24h0m0s,")
	g.Expect(d.Decision.Digest).To(Equal(digest))

	parameters := sha256Of("39:embedops.dev/storageclass-parameters/v1," +
		"10:parameters,1:4,4:type,3:gp3,4:zone,1:a,")
	g.Expect(decision.ParametersDigest(map[string]string{"zone": "a", "type": "gp3"})).To(Equal(parameters))
}

func TestDigestRecomputesFor(t *testing.T) {
	cases := []struct {
		name   string
		server *embedopsv1.EmbeddingServer
	}{
		{"defaults absent", server()},
		{"defaults filled", server(withDefaults)},
		{"Shared", server(withMode(embedopsv1.CacheModeShared))},
		{"every field set", server(withRevision("5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"),
			withStorageClass("standard-rwo"), withSize("20480Mi"), withRetainFor(90*time.Minute))},
		{"release at once", server(withRetainFor(time.Nanosecond))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := mustDecide(g, tc.server)

			digest, err := decision.Digest(d.Identity, d.Decision)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(digest).To(Equal(d.Decision.Digest))
			g.Expect(decision.IdentityKey(d.Identity)).To(Equal(d.Identity.Key))

			// A binding read back from the API server or a YAML dump.
			recorded := roundTrip(g, embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision})
			digest, err = decision.Digest(recorded.Identity, recorded.Decision)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(digest).To(Equal(d.Decision.Digest))
		})
	}
}

// roundTrip is spec after a YAML encoding and decoding.
func roundTrip(g Gomega, spec embedopsv1.ModelCacheBindingSpec) embedopsv1.ModelCacheBindingSpec {
	data, err := yaml.Marshal(spec)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var out embedopsv1.ModelCacheBindingSpec
	g.ExpectWithOffset(1, yaml.Unmarshal(data, &out)).To(Succeed())
	return out
}

func TestDigestIgnoresWhatItDoesNotCover(t *testing.T) {
	cases := []struct {
		name string
		edit func(*embedopsv1.CacheDecision)
	}{
		{"the digest itself", func(d *embedopsv1.CacheDecision) { d.Digest = "" }},
		{"provisioner", func(d *embedopsv1.CacheDecision) { d.Provisioner = "ebs.csi.aws.com" }},
		{"parameters digest", func(d *embedopsv1.CacheDecision) {
			d.StorageClassParametersDigest = decision.ParametersDigest(map[string]string{"type": "gp3"})
		}},
		{"access modes repeated", func(d *embedopsv1.CacheDecision) {
			d.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteOnce}
		}},
		{"size suffix", func(d *embedopsv1.CacheDecision) { d.Size = resource.MustParse("10240Mi") }},
		{"size in bytes", func(d *embedopsv1.CacheDecision) { d.Size = resource.MustParse("10737418240") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := mustDecide(g, server())
			edited := d.Decision.DeepCopy()
			tc.edit(edited)
			digest, err := decision.Digest(d.Identity, *edited)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(digest).To(Equal(d.Decision.Digest))
		})
	}
}

func TestDigestSortsAccessModes(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server())
	identity := d.Identity
	one, two := *d.Decision.DeepCopy(), *d.Decision.DeepCopy()
	one.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany}
	two.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteOnce}
	a, err := decision.Digest(identity, one)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := decision.Digest(identity, two)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(Equal(b))
	g.Expect(a).NotTo(Equal(d.Decision.Digest))
}

func TestDigestDetectsEditedFields(t *testing.T) {
	cases := []struct {
		name string
		edit func(*embedopsv1.CacheIdentity, *embedopsv1.CacheDecision)
	}{
		{"model", func(i *embedopsv1.CacheIdentity, _ *embedopsv1.CacheDecision) { i.Model = "BAAI/bge-base-en-v1.5" }},
		{"revision", func(i *embedopsv1.CacheIdentity, _ *embedopsv1.CacheDecision) { i.Revision = "v2" }},
		{"sharing domain", func(i *embedopsv1.CacheIdentity, _ *embedopsv1.CacheDecision) { i.SharingDomain = "team-a" }},
		{"key", func(i *embedopsv1.CacheIdentity, _ *embedopsv1.CacheDecision) { i.Key = sha256Of("forged") }},
		{"mode", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) { d.Mode = embedopsv1.CacheModeShared }},
		{"storage class", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) { d.StorageClassName = "fast" }},
		{"size", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) { d.Size = resource.MustParse("11Gi") }},
		{"size by a milli", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) {
			d.Size = resource.MustParse("10737418240001m")
		}},
		{"access modes", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) {
			d.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
		}},
		{"no access modes", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) { d.AccessModes = nil }},
		{"reclaim policy", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) { d.ReclaimPolicy = "Delete" }},
		{"retainFor", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) {
			d.RetainFor = metav1.Duration{Duration: 48 * time.Hour}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := mustDecide(g, server())
			identity, edited := d.Identity, *d.Decision.DeepCopy()
			tc.edit(&identity, &edited)
			digest, err := decision.Digest(identity, edited)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(digest).NotTo(Equal(d.Decision.Digest))
		})
	}
}

func TestDigestRefusesUnrecordableBindings(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(*embedopsv1.CacheIdentity, *embedopsv1.CacheDecision)
		message string
	}{
		{"no model", func(i *embedopsv1.CacheIdentity, _ *embedopsv1.CacheDecision) { i.Model = "" }, "identity needs"},
		{"no revision", func(i *embedopsv1.CacheIdentity, _ *embedopsv1.CacheDecision) { i.Revision = "" }, "identity needs"},
		{"no sharing domain", func(i *embedopsv1.CacheIdentity, _ *embedopsv1.CacheDecision) { i.SharingDomain = "" }, "identity needs"},
		{"mode None", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) { d.Mode = embedopsv1.CacheModeNone }, "neither PerReplica nor Shared"},
		{"no mode", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) { d.Mode = "" }, "neither PerReplica nor Shared"},
		{"no size", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) { d.Size = resource.Quantity{} }, "greater than zero"},
		{"negative retainFor", func(_ *embedopsv1.CacheIdentity, d *embedopsv1.CacheDecision) {
			d.RetainFor = metav1.Duration{Duration: -time.Second}
		}, "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := mustDecide(g, server())
			identity, edited := d.Identity, *d.Decision.DeepCopy()
			tc.edit(&identity, &edited)
			_, err := decision.Digest(identity, edited)
			g.Expect(err).To(MatchError(decision.ErrInvalidSpec))
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

func TestIdentityKeyIgnoresTheRecordedKey(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server())
	forged := d.Identity
	forged.Key = sha256Of("forged")
	g.Expect(decision.IdentityKey(forged)).To(Equal(d.Identity.Key))
}

func TestParametersDigest(t *testing.T) {
	base := map[string]string{"type": "gp3", "iops": "3000", "encrypted": "true"}
	cases := []struct {
		name       string
		parameters map[string]string
		same       bool
	}{
		{"same parameters, another map", map[string]string{"encrypted": "true", "iops": "3000", "type": "gp3"}, true},
		{"a value changed", map[string]string{"type": "gp2", "iops": "3000", "encrypted": "true"}, false},
		{"a key added", map[string]string{"type": "gp3", "iops": "3000", "encrypted": "true", "fsType": "ext4"}, false},
		{"a key removed", map[string]string{"type": "gp3", "iops": "3000"}, false},
		{"a key boundary moved", map[string]string{"typeg": "p3", "iops": "3000", "encrypted": "true"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			digest := decision.ParametersDigest(tc.parameters)
			g.Expect(digest).To(MatchRegexp(digestPattern))
			if tc.same {
				g.Expect(digest).To(Equal(decision.ParametersDigest(base)))
			} else {
				g.Expect(digest).NotTo(Equal(decision.ParametersDigest(base)))
			}
		})
	}
	t.Run("nil and empty are the same", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(decision.ParametersDigest(nil)).To(Equal(decision.ParametersDigest(map[string]string{})))
	})
}

func TestWithClusterFactsLeavesTheDigestAlone(t *testing.T) {
	g := NewWithT(t)
	d := mustDecide(g, server(withStorageClass("fast")))
	before := *d
	before.Decision = *d.Decision.DeepCopy()

	withFacts := decision.WithClusterFacts(d, "ebs.csi.aws.com", map[string]string{"type": "gp3"})
	g.Expect(withFacts.Decision.Provisioner).To(Equal("ebs.csi.aws.com"))
	g.Expect(withFacts.Decision.StorageClassParametersDigest).To(Equal(decision.ParametersDigest(map[string]string{"type": "gp3"})))
	g.Expect(withFacts.Decision.Digest).To(Equal(d.Decision.Digest))
	g.Expect(withFacts.Identity).To(Equal(d.Identity))
	g.Expect(decision.BindingName(withFacts)).To(Equal(decision.BindingName(d)))
	digest, err := decision.Digest(withFacts.Identity, withFacts.Decision)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(digest).To(Equal(d.Decision.Digest))
	g.Expect(*d).To(Equal(before), "WithClusterFacts modified its input")

	other := decision.WithClusterFacts(d, "other.csi", map[string]string{"type": "io2"})
	g.Expect(other.Decision.Digest).To(Equal(withFacts.Decision.Digest))
}

// manifest holds the fields of an EmbeddingServer as strings; "" is absent.
type manifest struct {
	namespace, name, model, revision, mode, class, size, retainFor string
}

// entry is one YAML mapping entry: a quoted scalar or a nested mapping.
type entry struct {
	key, value string
	children   []entry
}

// scalar is a YAML double-quoted scalar, or no entry for "".
func scalar(key, value string) []entry {
	if value == "" {
		return nil
	}
	quoted, _ := json.Marshal(value)
	return []entry{{key: key, value: string(quoted)}}
}

// entries are the manifest's mapping entries in declaration order.
func (m manifest) entries(extra ...entry) []entry {
	model := append(scalar("name", m.model), scalar("revision", m.revision)...)
	cache := append(append(scalar("mode", m.mode), scalar("storageClassName", m.class)...),
		append(scalar("size", m.size), scalar("retainFor", m.retainFor)...)...)
	spec := []entry{{key: "model", children: model}, {key: "cache", children: cache}}
	return []entry{
		{key: "apiVersion", value: `"embedops.dev/v1alpha1"`},
		{key: "kind", value: `"EmbeddingServer"`},
		{key: "metadata", children: append(scalar("name", m.name), scalar("namespace", m.namespace)...)},
		{key: "spec", children: append(spec, extra...)},
	}
}

// render writes entries as block YAML, shuffling every mapping when rng is set.
func render(b *strings.Builder, entries []entry, indent string, rng *rand.Rand) {
	if rng != nil {
		entries = append([]entry(nil), entries...)
		rng.Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
	}
	for _, e := range entries {
		switch {
		case e.children == nil && e.value == "":
			b.WriteString(indent + e.key + ": {}\n")
		case e.children == nil:
			b.WriteString(indent + e.key + ": " + e.value + "\n")
		default:
			b.WriteString(indent + e.key + ":\n")
			render(b, e.children, indent+"  ", rng)
		}
	}
}

// decode is the EmbeddingServer of a YAML document, as `embedops audit` reads it.
func decode(entries []entry, rng *rand.Rand) (*embedopsv1.EmbeddingServer, string, error) {
	var b strings.Builder
	render(&b, entries, "", rng)
	es := &embedopsv1.EmbeddingServer{}
	return es, b.String(), yaml.Unmarshal([]byte(b.String()), es)
}

// equivalent is m with schema defaults written out and size and retainFor
// written in another form with the same value.
func (m manifest) equivalent(es *embedopsv1.EmbeddingServer) manifest {
	out := m
	out.revision = cmpOr(m.revision, decision.DefaultRevision)
	out.mode = cmpOr(m.mode, string(decision.DefaultMode))
	out.size = decision.DefaultSize
	if m.size != "" {
		out.size = es.Spec.Cache.Size.String()
		if bytes, ok := es.Spec.Cache.Size.AsInt64(); ok {
			out.size = strconv.FormatInt(bytes, 10)
		}
	}
	out.retainFor = "24h"
	if m.retainFor != "" {
		out.retainFor = es.Spec.Cache.RetainFor.Duration.String()
	}
	return out
}

func cmpOr(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}

func FuzzDigestIsStable(f *testing.F) {
	f.Add("team-a", "embed", "BAAI/bge-small-en-v1.5", "", "", "", "", "", uint64(0))
	f.Add("team-a", "embed", "BAAI/bge-small-en-v1.5", "main", "PerReplica", "", "10Gi", "24h", uint64(1))
	f.Add("ml", "e5", "intfloat/e5-large-v2", "refs/pr/7", "Shared", "fast", "10240Mi", "90m", uint64(7))
	f.Add("ml", "local", "/models/gte/", "v1.0", "PerReplica", "standard-rwo", "1.5Gi", "1.5h", uint64(42))
	f.Add("ml", "big", "Alibaba-NLP/gte-Qwen2-7B-instruct", "main", "", "", "10G", "0s", uint64(99))
	f.Add("ml", "none", "a/b", "", "None", "", "", "", uint64(3))
	f.Add("", "nons", "a/b", "", "Shared", "", "", "", uint64(5))
	f.Add("ml", "bad", "a/b", "", "Local", "", "", "", uint64(11))
	f.Fuzz(func(t *testing.T, namespace, name, model, revision, mode, class, size, retainFor string, seed uint64) {
		g := NewWithT(t)
		m := manifest{namespace, name, model, revision, mode, class, size, retainFor}
		a, docA, err := decode(m.entries(), nil)
		if err != nil {
			t.Skip("not a decodable manifest")
		}
		// The same server with defaults written out, other value forms,
		// fields outside the decision, and every mapping in another order.
		extra := []entry{{key: "replicas", value: "3"}, {key: "image", value: `"tei:gpu"`}}
		b, docB, err := decode(m.equivalent(a).entries(extra...), rand.New(rand.NewPCG(seed, seed>>1)))
		g.Expect(err).NotTo(HaveOccurred(), "the equivalent manifest does not decode:\n%s", docB)

		da, errA := decision.For(a)
		db, errB := decision.For(b)
		if errA != nil {
			g.Expect(errA).To(MatchError(decision.ErrInvalidSpec))
			g.Expect(errB).To(MatchError(decision.ErrInvalidSpec), "documents:\n%s---\n%s", docA, docB)
			return
		}
		g.Expect(errB).NotTo(HaveOccurred(), "documents:\n%s---\n%s", docA, docB)
		if da == nil {
			g.Expect(db).To(BeNil(), "documents:\n%s---\n%s", docA, docB)
			return
		}
		g.Expect(db).To(Equal(da), "documents:\n%s---\n%s", docA, docB)
		g.Expect(da.Decision.Digest).To(MatchRegexp(digestPattern))
		g.Expect(da.Identity.Key).To(MatchRegexp(digestPattern))
		digest, err := decision.Digest(da.Identity, da.Decision)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(digest).To(Equal(da.Decision.Digest))
		recorded := roundTrip(g, embedopsv1.ModelCacheBindingSpec{Identity: da.Identity, Decision: da.Decision})
		digest, err = decision.Digest(recorded.Identity, recorded.Decision)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(digest).To(Equal(da.Decision.Digest))
		g.Expect(validation.IsDNS1123Label(decision.BindingName(da))).To(BeEmpty())
		g.Expect(validation.IsDNS1123Label(decision.ClaimTemplateName(da))).To(BeEmpty())
	})
}
