package ledger

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What choose decides is made with reads alone: every field of reads is a
// reader or plain data, so a choice cannot write before carryOut does. A
// field of any other type (a client that writes, the Ledger, a func) fails
// until it is judged here.
func TestReadsHoldNoWriter(t *testing.T) {
	allowed := map[reflect.Type]bool{
		reflect.TypeFor[client.Reader]():   true,
		reflect.TypeFor[labels.Selector](): true,
		reflect.TypeFor[[]string]():        true,
	}
	typ := reflect.TypeFor[reads]()
	if typ.NumField() == 0 {
		t.Fatal("reads has no fields to check")
	}
	for i := range typ.NumField() {
		if field := typ.Field(i); !allowed[field.Type] {
			t.Errorf("reads.%s is a %s, not a reader or plain data", field.Name, field.Type)
		}
	}
	for writer := range map[reflect.Type]bool{reflect.TypeFor[client.Writer](): true, reflect.TypeFor[client.StatusClient](): true} {
		for typ := range allowed {
			if typ.Kind() == reflect.Interface && typ.Implements(writer) {
				t.Errorf("%s, allowed in reads, can write", typ)
			}
		}
	}
}
