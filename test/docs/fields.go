package docs

import (
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// writtenKinds are the Kubernetes objects the controller writes: a field
// path the docs name may be one of theirs (spec.ordinals.start).
var writtenKinds = []reflect.Type{
	reflect.TypeFor[appsv1.StatefulSet](),
	reflect.TypeFor[corev1.Service](),
	reflect.TypeFor[corev1.PersistentVolumeClaim](),
	reflect.TypeFor[corev1.Pod](),
	reflect.TypeFor[batchv1.Job](),
	reflect.TypeFor[policyv1.PodDisruptionBudget](),
	reflect.TypeFor[networkingv1.NetworkPolicy](),
}

// kindField tells whether a field path is one of a written kind's, by its
// Go type's json keys.
func kindField(parts []string) bool {
	for _, kind := range writtenKinds {
		if typeHas(kind, parts) {
			return true
		}
	}
	return false
}

// typeHas walks a Go type along json keys, through pointers, slices and
// inlined structs.
func typeHas(t reflect.Type, parts []string) bool {
	if len(parts) == 0 {
		return true
	}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		field := t.Field(i)
		name, options, _ := strings.Cut(field.Tag.Get("json"), ",")
		switch {
		case name == parts[0] && typeHas(field.Type, parts[1:]):
			return true
		case (name == "" || strings.Contains(options, "inline")) && field.Anonymous && typeHas(field.Type, parts):
			return true
		}
	}
	return false
}
