package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// sampleInterval is how often the ready endpoints of a Service are counted:
// four times a second, so a dip shorter than the one-second
// sampling is seen too.
const sampleInterval = 250 * time.Millisecond

// storageChange is one change of a server's cache decision.
type storageChange struct {
	name   string
	change func(*embedopsv1.EmbeddingServer)
	// rolls: the change needs new storage, so the pods move to a new
	// StatefulSet; otherwise the StatefulSet stays as it is.
	rolls bool
}

func TestStorageChangesKeepTwoOfThreeReplicasServing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	namespace := cluster.Namespace(t)
	other := createStorageClass(t, g, namespace+"-other")
	server := fixtures.EmbeddingServer(namespace, "rolling", fixtures.WithReplicas(3), fixtures.WithRetainFor(time.Hour))
	g.Expect(cluster.Client.Create(t.Context(), server)).To(Succeed())
	key := client.ObjectKeyFromObject(server)
	expectReady(t, key, metav1.ConditionTrue, embedopsv1.AvailableReason)

	changes := []storageChange{
		{"retainFor", func(s *embedopsv1.EmbeddingServer) {
			s.Spec.Cache.RetainFor = &metav1.Duration{Duration: 2 * time.Hour}
		}, false},
		{"revision", func(s *embedopsv1.EmbeddingServer) { s.Spec.Model.Revision = "refs/pr/1" }, true},
		{"size", func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Size = new(resource.MustParse("20Gi")) }, true},
		{"storage class", func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.StorageClassName = other }, true},
		{"mode", func(s *embedopsv1.EmbeddingServer) { s.Spec.Cache.Mode = embedopsv1.CacheModeShared }, true},
	}
	for _, c := range changes {
		before := onlyStatefulSet(t, g, key)
		sampler := sampleReadyEndpoints(t, key)
		start := time.Now()
		update(t, key, c.change)
		expectReady(t, key, metav1.ConditionTrue, embedopsv1.AvailableReason)
		after := onlyStatefulSet(t, g, key)
		fewest, samples := sampler.stop()
		t.Logf("%-13s fewest ready endpoints %d of 3 (%d samples), done in %s, StatefulSet %s -> %s",
			c.name, fewest, samples, time.Since(start).Round(time.Second), before.Name, after.Name)
		g.Expect(fewest).To(BeNumerically(">=", 2), "%s: the Service's ready endpoints dropped below 2", c.name)
		if c.rolls {
			g.Expect(after.UID).NotTo(Equal(before.UID), "%s needs new storage: the pods move to a new StatefulSet", c.name)
		} else {
			g.Expect(after.UID).To(Equal(before.UID), "%s moves no data: the StatefulSet stays", c.name)
			g.Expect(after.Generation).To(Equal(before.Generation))
		}
	}
}

// createStorageClass makes a StorageClass of the local cluster's
// provisioner, deleted when the test ends.
func createStorageClass(t *testing.T, g *WithT, name string) string {
	t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       harness.ProvisionerName,
		ReclaimPolicy:     new(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: new(storagev1.VolumeBindingImmediate),
	}
	g.Expect(cluster.Client.Create(t.Context(), class)).To(Succeed())
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), class) })
	return name
}

// onlyStatefulSet waits until the server has one StatefulSet, and returns it.
func onlyStatefulSet(t *testing.T, g *WithT, key types.NamespacedName) *appsv1.StatefulSet {
	t.Helper()
	var only *appsv1.StatefulSet
	g.Eventually(func(g Gomega) {
		var list appsv1.StatefulSetList
		g.Expect(cluster.Client.List(t.Context(), &list, client.InNamespace(key.Namespace),
			client.MatchingLabels{embedopsv1.NameLabel: key.Name})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		only = &list.Items[0]
	}).WithTimeout(settle).Should(Succeed())
	return only
}

// endpointSampler counts a Service's ready endpoints every sampleInterval.
type endpointSampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	fewest  int
	samples int
	err     error
}

// sampleReadyEndpoints starts counting the ready endpoints of the server's
// Service, as kube-proxy reads them: the EndpointSlices labelled with the
// Service's name, an endpoint serving traffic when its ready condition is
// not false (k8s.io/api/discovery/v1 EndpointConditions: nil means ready).
func sampleReadyEndpoints(t *testing.T, service types.NamespacedName) *endpointSampler {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &endpointSampler{cancel: cancel, done: make(chan struct{}), fewest: -1}
	go func() {
		defer close(s.done)
		_ = wait.PollUntilContextCancel(ctx, sampleInterval, true, func(ctx context.Context) (bool, error) {
			n, err := readyEndpoints(ctx, service)
			s.record(n, err)
			return false, nil
		})
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// record keeps the fewest count seen and the first error.
func (s *endpointSampler) record(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil && !errors.Is(err, context.Canceled) {
			s.err = err
		}
		return
	}
	s.samples++
	if s.fewest < 0 || n < s.fewest {
		s.fewest = n
	}
}

// stop ends the sampling and returns the fewest ready endpoints seen (-1
// with an error when a sample failed) and how many samples were taken.
func (s *endpointSampler) stop() (int, int) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return -1, s.samples
	}
	return s.fewest, s.samples
}

// readyEndpoints counts the pods the Service's EndpointSlices list as ready.
func readyEndpoints(ctx context.Context, service types.NamespacedName) (int, error) {
	slices, err := cluster.Clientset.DiscoveryV1().EndpointSlices(service.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service.Name,
	})
	if err != nil {
		return 0, err
	}
	ready := map[string]bool{}
	for _, slice := range slices.Items {
		for _, endpoint := range slice.Endpoints {
			if endpoint.Conditions.Ready != nil && !*endpoint.Conditions.Ready {
				continue
			}
			name := endpoint.Addresses[0]
			if endpoint.TargetRef != nil {
				name = endpoint.TargetRef.Name
			}
			ready[name] = true
		}
	}
	return len(ready), nil
}
