package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// unrelatedPayload is each unrelated ConfigMap's and Secret's data and each
// pod's annotation, so that a cache that held them would show in the heap.
var unrelatedPayload = strings.Repeat("x", 1024)

// unrelatedLabels mark the unrelated objects; they lack embedops' labels.
var unrelatedLabels = map[string]string{"app.kubernetes.io/name": "unrelated"}

// unrelatedKinds is how many kinds of unrelated objects there are: pods,
// ConfigMaps and Secrets.
const unrelatedKinds = 3

// CreateUnrelated creates pods and as many ConfigMaps and Secrets in
// namespace on the worker pool, none of them embedops', and waits until
// kwok runs the pods.
func (e *Env) CreateUnrelated(ctx context.Context, namespace string, pods int, timeout time.Duration) error {
	started := time.Now()
	err := forEach(ctx, unrelatedKinds*pods, func(ctx context.Context, i int) error {
		var obj client.Object
		switch n := i / unrelatedKinds; i % unrelatedKinds {
		case 0:
			obj = unrelatedPod(namespace, n)
		case 1:
			obj = unrelatedConfigMap(namespace, n)
		default:
			obj = unrelatedSecret(namespace, n)
		}
		if err := e.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.logf("created %d pods, ConfigMaps and Secrets each in %s", pods, time.Since(started).Round(time.Millisecond))
	return e.waitAll(ctx, "unrelated pods Running", timeout, func(ctx context.Context) (int, int, error) {
		running := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
		err := e.Client.List(ctx, running, client.InNamespace(namespace),
			client.MatchingFields{"status.phase": string(corev1.PodRunning)})
		return len(running.Items), pods, err
	})
}

// unrelatedPod is a pod the scheduler places on a kwok node and kwok runs
// and makes Ready, as the harness' pods; its image is never pulled.
func unrelatedPod(namespace string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("unrelated-%d", i),
			Namespace:   namespace,
			Labels:      unrelatedLabels,
			Annotations: map[string]string{"bench.embedops.dev/payload": unrelatedPayload},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "unrelated:bench"}}},
	}
}

// unrelatedConfigMap is a ConfigMap no embedops object refers to.
func unrelatedConfigMap(namespace string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", i), Namespace: namespace, Labels: unrelatedLabels},
		Data:       map[string]string{"payload": unrelatedPayload},
	}
}

// unrelatedSecret is a Secret no embedops object refers to; the controller
// reads Secrets by name only, so it never holds one of these.
func unrelatedSecret(namespace string, i int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", i), Namespace: namespace, Labels: unrelatedLabels},
		StringData: map[string]string{"payload": unrelatedPayload},
	}
}
