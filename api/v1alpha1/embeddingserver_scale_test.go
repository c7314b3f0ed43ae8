package v1alpha1_test

import (
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

func TestScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	namespace := harness.Namespace(t, env.Client)
	g.Expect(env.Client.Create(t.Context(), serverManifest(t, namespace, "s", minimalModel))).To(Succeed())
	server := &embedopsv1.EmbeddingServer{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "s"}, server)).To(Succeed())
	server.Status.Replicas, server.Status.Selector = 1, "app.kubernetes.io/instance=s"
	g.Expect(env.Client.Status().Update(t.Context(), server)).To(Succeed())

	scale := &autoscalingv1.Scale{}
	g.Expect(env.Client.SubResource("scale").Get(t.Context(), server, scale)).To(Succeed())
	g.Expect(scale.Spec.Replicas).To(Equal(int32(1)), "spec.replicas, defaulted")
	g.Expect(scale.Status.Replicas).To(Equal(int32(1)))
	g.Expect(scale.Status.Selector).To(Equal("app.kubernetes.io/instance=s"))

	scale.Spec.Replicas = 3
	g.Expect(env.Client.SubResource("scale").Update(t.Context(), server, client.WithSubResourceBody(scale))).To(Succeed())
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(server), server)).To(Succeed())
	g.Expect(server.Spec.Replicas).To(HaveValue(Equal(int32(3))))

	scale.Spec.Replicas = -1
	err := env.Client.SubResource("scale").Update(t.Context(), server, client.WithSubResourceBody(scale))
	g.Expect(err).To(MatchError(ContainSubstring("spec.replicas in body should be greater than or equal to 0")))
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(server), server)).To(Succeed())
	g.Expect(server.Spec.Replicas).To(HaveValue(Equal(int32(3))), "a refused scale changes nothing")
}
