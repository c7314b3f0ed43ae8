//go:build linux

package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/embedops/embedops/test/harness"
)

// The hub stand-in in a test's namespace.
const (
	// hubName names its pod, Service and models ConfigMap.
	hubName = "hub"
	// hubPort is where it listens in its pod.
	hubPort = 8080
	// hubModelsFile is its models file, test/standin/hub's -models.
	hubModelsFile = "models.json"
)

// hubModel is an entry of test/standin/hub's models file: a generated
// multi-format repository (hubtest.MultiFormatRepository) on Branch, under
// Commit's id when set, each weights file Unit bytes (4096 if zero).
type hubModel struct {
	ID         string `json:"id"`
	Branch     string `json:"branch,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Repository string `json:"repository"`
	Unit       int    `json:"unit,omitempty"`
}

// hub is a hub stand-in pod and Service in a test's namespace.
type hub struct {
	ns string
	// endpoint is HF_ENDPOINT for the namespace's servers: the Service by
	// name, as a pod resolves it.
	endpoint string
	// commits are the commits the hub made, by model id.
	commits map[string]string
}

// startHub runs test/standin/hub serving models, requiring token when not
// empty, and waits until it is ready.
func startHub(t *testing.T, ns, token string, models ...hubModel) *hub {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	cs := node.Clientset.CoreV1()
	for i := range models {
		models[i].Repository = "multi-format"
	}
	spec, err := json.Marshal(map[string]any{"models": models})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: hubName},
		Data:       map[string]string{hubModelsFile: string(spec)},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.Pods(ns).Create(ctx, hubPod(token), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: hubName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": hubName},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(hubPort)}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	waitForPod(t, ns, hubName, podReady)
	waitHubByName(t, ns)
	h := &hub{ns: ns, endpoint: fmt.Sprintf("http://%s.%s.svc", hubName, ns), commits: hubCommits(t, ns)}
	for _, m := range models {
		g.Expect(h.commits).To(HaveKey(m.ID), "the hub printed a commit per model")
	}
	return h
}

// waitHubByName waits until pods can reach the hub by its Service's name
// (harness.Node.ServiceRouted): a server started before would see TEI's
// first download refused, and TEI restart.
func waitHubByName(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func() error { return node.ServiceRouted(t.Context(), ns, hubName) }).
		WithContext(t.Context()).WithTimeout(podTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// hubPod runs the hub stand-in as a restricted pod with a TCP readiness
// probe.
func hubPod(token string) *corev1.Pod {
	args := []string{fmt.Sprintf("-addr=:%d", hubPort), "-models=/etc/hub/" + hubModelsFile}
	if token != "" {
		args = append(args, "-token="+token)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: hubName, Labels: map[string]string{"app": hubName}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true)},
			Containers: []corev1.Container{{
				Name:            hubName,
				Image:           harness.HubImage.Ref,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Args:            args,
				Ports:           []corev1.ContainerPort{{ContainerPort: hubPort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(hubPort)}},
					PeriodSeconds: 1,
				},
				VolumeMounts:    []corev1.VolumeMount{{Name: "models", MountPath: "/etc/hub", ReadOnly: true}},
				SecurityContext: restricted(),
			}},
			Volumes: []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: hubName}},
			}}},
		},
	}
}

// hubCommits reads the commits the hub printed on stdout by model id
// (hubCommitLines).
func hubCommits(t *testing.T, ns string) map[string]string {
	t.Helper()
	commits := map[string]string{}
	for _, c := range hubCommitLines(t, ns) {
		commits[c.Model] = c.Commit
	}
	return commits
}

// hubCommit is a commit the hub printed: one JSON line each
// (test/standin/hub).
type hubCommit struct{ Model, Branch, Commit string }

// hubCommitLines reads the commits the hub printed on stdout.
func hubCommitLines(t *testing.T, ns string) []hubCommit {
	t.Helper()
	logs, err := node.Clientset.CoreV1().Pods(ns).GetLogs(hubName, &corev1.PodLogOptions{}).DoRaw(t.Context())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var commits []hubCommit
	scanner := bufio.NewScanner(bytes.NewReader(logs))
	for scanner.Scan() {
		var c hubCommit
		if json.Unmarshal(scanner.Bytes(), &c) == nil && c.Commit != "" {
			commits = append(commits, c)
		}
	}
	return commits
}

// stop deletes the hub's pod and waits until it is gone, so nothing
// answers at its Service.
func (h *hub) stop(t *testing.T) {
	t.Helper()
	pods := node.Clientset.CoreV1().Pods(h.ns)
	NewWithT(t).Expect(pods.Delete(t.Context(), hubName, metav1.DeleteOptions{})).To(Succeed())
	NewWithT(t).Eventually(func() bool {
		_, err := pods.Get(t.Context(), hubName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithContext(t.Context()).WithTimeout(podTimeout).WithPolling(200 * time.Millisecond).Should(BeTrue())
}
