package controller

import (
	"reflect"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/internal/controller/act"
	"github.com/embedops/embedops/internal/controller/binding"
	"github.com/embedops/embedops/internal/controller/ledger"
)

// The reconcilers hold no client that writes, however deep in their
// fields: every write goes through the rooms that own writes, act (the
// server's children, Jobs and status) and the ledger (bindings and their
// claims). A new field that can write fails here.
func TestOnlyActAndTheLedgerHoldWriters(t *testing.T) {
	t.Parallel()
	allowed := map[string]bool{
		reflect.TypeFor[act.Writer]().PkgPath():    true,
		reflect.TypeFor[ledger.Ledger]().PkgPath(): true,
	}
	for _, reconciler := range []reflect.Type{reflect.TypeFor[EmbeddingServerReconciler](), reflect.TypeFor[binding.Reconciler]()} {
		for _, path := range writersIn(reconciler, reconciler.Name(), allowed, map[reflect.Type]bool{}) {
			t.Errorf("%s can write to the API server outside act and the ledger", path)
		}
	}
}

// writersIn lists the paths of t's fields, struct fields within them
// included, whose type can write (client.Writer, client.StatusClient)
// and is not declared in an allowed package.
func writersIn(t reflect.Type, path string, allowed map[string]bool, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if seen[t] || allowed[t.PkgPath()] {
		return nil
	}
	seen[t] = true
	if canWrite(t) {
		return []string{path}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var found []string
	for i := range t.NumField() {
		field := t.Field(i)
		found = append(found, writersIn(field.Type, path+"."+field.Name, allowed, seen)...)
	}
	return found
}

// canWrite reports whether a value of t, or a pointer to one, can create,
// update, patch or delete objects or their status.
func canWrite(t reflect.Type) bool {
	for _, can := range []reflect.Type{reflect.TypeFor[client.Writer](), reflect.TypeFor[client.StatusClient]()} {
		if t.Implements(can) || reflect.PointerTo(t).Implements(can) {
			return true
		}
	}
	return false
}
