package decision_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/decision"
)

// The admission rules of spec.cache.size and spec.cache.retainFor these
// fuzz tests mirror; cacheSchema fails when the CRD no longer has them.
const (
	sizeGuardRule   = `string(self).size() <= 32 && !string(self).matches('[eE][-+]?[0-9]{3}')`
	retainBoundRule = `duration(self) <= duration('8760h')`
	maxSizeLength   = 32
	maxRetainFor    = 8760 * time.Hour
)

// longExponent is the part of sizeGuardRule that refuses an exponent of
// three digits or more: resource.ParseQuantity itself spends minutes on
// "1e-100000000", so such sizes are never parsed here either.
var longExponent = regexp.MustCompile(`[eE][-+]?[0-9]{3}`)

// cacheRules are the schema facts of spec.cache the API server enforces.
type cacheRules struct {
	sizePattern, retainPattern *regexp.Regexp
	retainMaxLength            int
}

// sizeAdmitted reports whether the API server admits s as spec.cache.size:
// pattern, guard rule and (CEL's quantity() is resource.ParseQuantity) the
// range rules.
func (r cacheRules) sizeAdmitted(s string) bool {
	if !r.sizePattern.MatchString(s) || len(s) > maxSizeLength || longExponent.MatchString(s) {
		return false
	}
	q, err := resource.ParseQuantity(s)
	return err == nil && inRange(q)
}

// inRange is the range the admission rules and For accept.
func inRange(size resource.Quantity) bool {
	return size.Sign() > 0 && size.CmpInt64(math.MaxInt64) <= 0
}

// retainAdmitted reports whether the API server admits s as
// spec.cache.retainFor: pattern, length and (CEL's duration() is
// time.ParseDuration) the bound.
func (r cacheRules) retainAdmitted(s string) bool {
	d, err := time.ParseDuration(s)
	return r.retainPattern.MatchString(s) && len(s) <= r.retainMaxLength && err == nil && d <= maxRetainFor
}

// cacheSchema reads the rules of spec.cache from the generated CRD.
func cacheSchema(f *testing.F) cacheRules {
	f.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "embedops.dev_embeddingservers.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		f.Fatal(err)
	}
	cache := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["cache"]
	size, retain := cache.Properties["size"], cache.Properties["retainFor"]
	if !hasRule(size, sizeGuardRule) || !hasRule(retain, retainBoundRule) || retain.MaxLength == nil {
		f.Fatalf("the CRD lost a rule these fuzz tests mirror: size %v, retainFor %v (maxLength %v)", size.XValidations, retain.XValidations, retain.MaxLength)
	}
	return cacheRules{
		sizePattern:     regexp.MustCompile(size.Pattern),
		retainPattern:   regexp.MustCompile(retain.Pattern),
		retainMaxLength: int(*retain.MaxLength),
	}
}

func hasRule(schema apiextensionsv1.JSONSchemaProps, rule string) bool {
	return slices.ContainsFunc(schema.XValidations, func(r apiextensionsv1.ValidationRule) bool { return r.Rule == rule })
}

// FuzzCacheSize checks that every size the API server admits decodes as the
// controller decodes it, that For accepts a size exactly when it is in the
// range the admission rules accept, and that the recorded size is
// canonical: it keeps the value, parses back to itself and decides the same
// digest.
func FuzzCacheSize(f *testing.F) {
	rules := cacheSchema(f)
	for _, seed := range []string{"10Gi", "10240Mi", "10737418240", "50e9", "1.5Ti", "0.5", "0", "-1Gi", "+1G", "9223372036854775807",
		"9223372036854775808", "100Ei", "10E", "1e-9", "1e-10", "1e99", "1e100000000", ".5", "5.", "1m", "lots", " 1Gi", "0x10"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxSizeLength || longExponent.MatchString(s) {
			checkRefusedUnparsed(t, s)
			return
		}
		var size resource.Quantity
		err := json.Unmarshal(quoted(t, s), &size)
		if rules.sizeAdmitted(s) && err != nil {
			t.Fatalf("the API server admits size %q, which the controller cannot decode: %v", s, err)
		}
		if err != nil {
			return
		}
		d, err := decision.For(server(func(es *embedopsv1.EmbeddingServer) { es.Spec.Cache.Size = &size }))
		if !inRange(size) {
			if !errors.Is(err, decision.ErrInvalidSpec) {
				t.Fatalf("size %q (%s) is out of range, yet For returned %v", s, size.String(), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("size %q (%s) is in range, yet For failed: %v", s, size.String(), err)
		}
		checkRecordedSize(t, s, size, d)
	})
}

// checkRefusedUnparsed checks that a manifest with the size s, which
// admission refuses for its form before parsing it, is refused by
// ServersFromYAML (decide, the audit) too, without parsing it for minutes.
func checkRefusedUnparsed(t *testing.T, s string) {
	t.Helper()
	manifest := fmt.Appendf(nil, `{"apiVersion":"embedops.dev/v1alpha1","kind":"EmbeddingServer","metadata":{"name":"a"},`+
		`"spec":{"model":{"name":"a/b"},"cache":{"size":%s}}}`, quoted(t, s))
	if servers, err := decision.ServersFromYAML(manifest, "default"); err == nil {
		t.Fatalf("size %q is refused at admission for its form, yet ServersFromYAML decoded %v", s, servers[0].Spec.Cache.Size)
	}
}

// checkRecordedSize checks the size a decision records for the size s.
func checkRecordedSize(t *testing.T, s string, size resource.Quantity, d *decision.Decision) {
	t.Helper()
	recorded := d.Decision.Size
	if recorded.Cmp(size) != 0 {
		t.Fatalf("size %q was recorded as %s, another value", s, recorded.String())
	}
	again, err := resource.ParseQuantity(recorded.String())
	if err != nil || again.String() != recorded.String() {
		t.Fatalf("size %q was recorded as %q, which parses to %q (%v)", s, recorded.String(), again.String(), err)
	}
	redecided, err := decision.For(server(func(es *embedopsv1.EmbeddingServer) { es.Spec.Cache.Size = &again }))
	if err != nil || redecided.Decision.Digest != d.Decision.Digest {
		t.Fatalf("size %q and its recorded form %q decide differently (%v)", s, recorded.String(), err)
	}
	checkBindingRoundTrip(t, d)
}

// FuzzRetainFor checks that every retainFor the API server admits decodes
// to the value CEL compared, that For refuses exactly the negative ones and
// those above MaxRetainFor (as admission does),
// and that equal durations written differently decide the same digest.
func FuzzRetainFor(f *testing.F) {
	rules := cacheSchema(f)
	for _, seed := range []string{"24h", "0s", "0", "1h30m", "90m", "1.5h", "8760h", "8761h", "2562047h", "9999999999h", "-1h", "+5m",
		"1us", "1µs", "300ms", ".5h", "1d", "1h1h", "", "h"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var retainFor metav1.Duration
		err := json.Unmarshal(quoted(t, s), &retainFor)
		if rules.retainAdmitted(s) && err != nil {
			t.Fatalf("the API server admits retainFor %q, which the controller cannot decode: %v", s, err)
		}
		if err != nil {
			return
		}
		if celValue, _ := time.ParseDuration(s); celValue != retainFor.Duration {
			t.Fatalf("retainFor %q is %s to CEL and %s to the controller", s, celValue, retainFor.Duration)
		}
		d, err := decision.For(server(func(es *embedopsv1.EmbeddingServer) { es.Spec.Cache.RetainFor = &retainFor }))
		if retainFor.Duration < 0 || retainFor.Duration > decision.MaxRetainFor {
			if !errors.Is(err, decision.ErrInvalidSpec) {
				t.Fatalf("retainFor %q is negative or above %s, yet For returned %v", s, decision.MaxRetainFor, err)
			}
			return
		}
		if err != nil || d.Decision.RetainFor != retainFor {
			t.Fatalf("retainFor %q: For returned %+v, %v", s, d, err)
		}
		checkCanonicalRetainFor(t, s, d)
	})
}

// checkCanonicalRetainFor checks that the canonical form of a decision's
// retainFor decodes to the same value and decides the same digest.
func checkCanonicalRetainFor(t *testing.T, s string, d *decision.Decision) {
	t.Helper()
	canonical := d.Decision.RetainFor.Duration.String()
	var again metav1.Duration
	if err := json.Unmarshal(quoted(t, canonical), &again); err != nil || again != d.Decision.RetainFor {
		t.Fatalf("retainFor %q formats as %q, which decodes to %s (%v)", s, canonical, again.Duration, err)
	}
	redecided, err := decision.For(server(func(es *embedopsv1.EmbeddingServer) { es.Spec.Cache.RetainFor = &again }))
	if err != nil || redecided.Decision.Digest != d.Decision.Digest {
		t.Fatalf("retainFor %q and %q decide differently (%v)", s, canonical, err)
	}
	checkBindingRoundTrip(t, d)
}

// checkBindingRoundTrip checks that a decision written to a binding and read
// back still verifies against its digest.
func checkBindingRoundTrip(t *testing.T, d *decision.Decision) {
	t.Helper()
	data, err := json.Marshal(embedopsv1.ModelCacheBindingSpec{Identity: d.Identity, Decision: d.Decision})
	if err != nil {
		t.Fatal(err)
	}
	var read embedopsv1.ModelCacheBindingSpec
	if err := json.Unmarshal(data, &read); err != nil {
		t.Fatalf("a recorded decision does not decode: %v\n%s", err, data)
	}
	digest, err := decision.Digest(read.Identity, read.Decision)
	if err != nil || digest != d.Decision.Digest {
		t.Fatalf("a recorded decision read back digests to %s (%v), want %s\n%s", digest, err, d.Decision.Digest, data)
	}
}

// FuzzServersFromYAML checks that any input either fails or yields servers
// of the right kind with a namespace, which encode and decode to
// themselves.
func FuzzServersFromYAML(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata: {name: a}\nspec: {model: {name: a/b}}\n",
		"apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nmetadata: {name: a, namespace: x}\nspec: {model: {name: a/b}, cache: {size: 1Gi, retainFor: 1h}}\n---\nkind: ConfigMap\n",
		"apiVersion: embedops.dev/v1alpha1\nkind: EmbeddingServer\nspec: {bogus: 1}\n",
		`{"apiVersion":"embedops.dev/v1alpha1","kind":"EmbeddingServer","spec":{"cache":{"size":"10Gi"}}}`,
		"---\n---\n", "a: [", "kind: [EmbeddingServer]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if longExponent.Match(data) {
			t.Skip("a quantity with a long exponent takes minutes to parse")
		}
		servers, err := decision.ServersFromYAML(data, "default")
		if err != nil {
			return
		}
		for _, s := range servers {
			if s.Kind != embedopsv1.EmbeddingServerKind || s.APIVersion != embedopsv1.GroupVersion.String() || s.Namespace == "" {
				t.Fatalf("ServersFromYAML returned %s %s in namespace %q", s.APIVersion, s.Kind, s.Namespace)
			}
			checkServerRoundTrip(t, s)
		}
	})
}

// checkServerRoundTrip checks that a decoded server encodes to YAML that
// decodes to the same server.
func checkServerRoundTrip(t *testing.T, s *embedopsv1.EmbeddingServer) {
	t.Helper()
	encoded, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := decision.ServersFromYAML(encoded, "other")
	if err != nil || len(again) != 1 {
		t.Fatalf("a decoded server does not decode again (%v):\n%s", err, encoded)
	}
	first, _ := decision.For(s)
	second, _ := decision.For(again[0])
	if (first == nil) != (second == nil) || (first != nil && first.Decision.Digest != second.Decision.Digest) {
		t.Fatalf("a decoded server decides differently once encoded again:\n%s", encoded)
	}
}

// quoted is s as a JSON string.
func quoted(t *testing.T, s string) []byte {
	t.Helper()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
