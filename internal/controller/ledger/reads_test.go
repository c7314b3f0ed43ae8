package ledger

import (
	"reflect"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What choose decides is made with reads alone: no field of reads can
// create, update, patch or delete, so a choice cannot write before
// carryOut does.
func TestReadsHoldNoWriter(t *testing.T) {
	typ := reflect.TypeFor[reads]()
	for i := range typ.NumField() {
		field := typ.Field(i)
		for _, writer := range []reflect.Type{reflect.TypeFor[client.Writer](), reflect.TypeFor[client.StatusClient]()} {
			if field.Type.Implements(writer) || reflect.PointerTo(field.Type).Implements(writer) {
				t.Errorf("reads.%s is a %s, which can write", field.Name, field.Type)
				break
			}
		}
	}
	if typ.NumField() == 0 {
		t.Fatal("reads has no fields to check")
	}
}
