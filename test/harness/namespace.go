package harness

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace creates a namespace unique to the test and deletes it when the
// test ends. envtest runs no namespace controller, so deletion only marks it.
func Namespace(t testing.TB, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namePrefix(t)}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating a test namespace: %v", err)
	}
	t.Cleanup(func() {
		// The test's context is already cancelled during cleanup.
		_ = c.Delete(context.Background(), ns)
	})
	return ns.Name
}

// namePrefix turns a test name into a valid generateName prefix.
func namePrefix(t testing.TB) string {
	name := strings.ToLower(t.Name())
	var b strings.Builder
	for _, r := range name {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	prefix := strings.Trim(b.String(), "-")
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	return strings.TrimRight(prefix, "-") + "-"
}
