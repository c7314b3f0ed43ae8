package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// The hub stand-in in the real node's cluster.
const (
	// hubNamespace holds the hub stand-in, apart from the examples.
	hubNamespace = "embedops-hub"
	// hubName names its Deployment, Service and ConfigMap.
	hubName = "hub"
	// hubPort is where the stand-in listens in its pod.
	hubPort = 8080
	// clusterDomain is the real node's DNS domain (harness.ClusterDomain).
	clusterDomain = "cluster.local"
	// modelsKey is the ConfigMap key of the stand-in's models file.
	modelsKey = "models.json"
)

// hubEndpoint is HF_ENDPOINT for the examples' servers: the hub Service.
var hubEndpoint = fmt.Sprintf("http://%s.%s.svc.%s", hubName, hubNamespace, clusterDomain)

// commitPattern is a full commit id, which the stand-in must serve under
// that id (test/standin/hub's "commit").
var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// hubModel is one entry of test/standin/hub's models file.
type hubModel struct {
	ID         string `json:"id"`
	Branch     string `json:"branch,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Repository string `json:"repository"`
}

// hubModels is the stand-in's models file for servers: a generated
// multi-format repository of each model at each revision, a pinned commit
// under its own id.
func hubModels(servers []exampleServer) ([]byte, error) {
	var models []hubModel
	seen := map[string]bool{}
	for _, s := range servers {
		if seen[s.model+"@"+s.revision] {
			continue
		}
		seen[s.model+"@"+s.revision] = true
		m := hubModel{ID: s.model, Branch: s.revision, Repository: "multi-format"}
		if commitPattern.MatchString(s.revision) {
			m.Branch, m.Commit = "main", s.revision
		}
		models = append(models, m)
	}
	return json.Marshal(map[string]any{"models": models})
}

// hubObjects are the stand-in's namespace, models, Deployment and Service.
func hubObjects(models []byte) []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": "hub-standin"}
	meta := metav1.ObjectMeta{Namespace: hubNamespace, Name: hubName, Labels: labels}
	port := intstr.FromInt32(hubPort)
	pod := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "hub", Image: harness.HubImage.Ref, ImagePullPolicy: corev1.PullNever,
			Args:           []string{fmt.Sprintf("-addr=:%d", hubPort), "-models=/etc/hub/" + modelsKey},
			Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: hubPort}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}, PeriodSeconds: 1},
			VolumeMounts:   []corev1.VolumeMount{{Name: "models", MountPath: "/etc/hub", ReadOnly: true}},
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
		Volumes: []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: hubName}},
		}}},
	}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNamespace}},
		&corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{modelsKey: string(models)}},
		&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		}},
		&corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: port}},
		}},
	}
}

// startHub runs the hub stand-in in the cluster and waits until it is
// ready and pods can reach it by its Service's name
// (harness.Node.ServiceRouted): a server started before would see its
// first download refused.
func (e *env) startHub(ctx context.Context) error {
	models, err := hubModels(e.servers)
	if err != nil {
		return err
	}
	for _, obj := range hubObjects(models) {
		if err := e.client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating the hub stand-in's %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return poll(ctx, e.opts.timeout, "the hub stand-in to be ready", func(ctx context.Context) error {
		deployment := &appsv1.Deployment{}
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: hubNamespace, Name: hubName}, deployment); err != nil {
			return err
		}
		if deployment.Status.ReadyReplicas < 1 {
			return fmt.Errorf("deployment %s/%s has no ready replica", hubNamespace, hubName)
		}
		return e.node.ServiceRouted(ctx, hubNamespace, hubName)
	})
}
