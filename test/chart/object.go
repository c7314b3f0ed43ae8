package chart

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Object is a rendered object as JSON decodes it: numbers are float64, so
// that objects from Helm and from kustomize compare equal.
type Object map[string]any

// NewObject converts a decoded object, a map or a struct, to an Object.
func NewObject(v any) (Object, error) { return normalize(v) }

// Key names an object: group/kind, namespace and name.
func (o Object) Key() string {
	meta, _ := o["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	return fmt.Sprintf("%s/%s %s/%s", o.Group(), o.Kind(), ns, o.Name())
}

// Group is the object's API group, empty for the core group.
func (o Object) Group() string {
	if g, _, grouped := strings.Cut(o.str("apiVersion"), "/"); grouped {
		return g
	}
	return ""
}

// Kind is the object's kind.
func (o Object) Kind() string { return o.str("kind") }

// Name is the object's name.
func (o Object) Name() string {
	meta, _ := o["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	return name
}

func (o Object) str(key string) string {
	s, _ := o[key].(string)
	return s
}

// ByKey indexes objects by Key, failing on a duplicate.
func ByKey(objects []Object) (map[string]Object, error) {
	out := make(map[string]Object, len(objects))
	for _, o := range objects {
		if _, dup := out[o.Key()]; dup {
			return nil, fmt.Errorf("%s rendered twice", o.Key())
		}
		out[o.Key()] = o
	}
	return out, nil
}

// normalize converts v to an Object through JSON.
func normalize(v any) (Object, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var o Object
	return o, json.Unmarshal(data, &o)
}

// OnlyInChart reports whether o is one of the objects the chart renders
// and config/default does not: the CRD schema policy and its binding
// (templates/crd-schema-policy.yaml), which refuse the older CRDs a helm
// rollback applies (test/upgrade TestHelmRollbackKeepsTheNewerCRDs).
func OnlyInChart(o Object) bool {
	return o.Group() == "admissionregistration.k8s.io" && o.Name() == "embedops-crd-schema-version"
}
