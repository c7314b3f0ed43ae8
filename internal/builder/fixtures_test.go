package builder_test

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
	"github.com/embedops/embedops/test/fixtures"
)

const testNamespace = "models"

// server returns the EmbeddingServer of examples/minimal.yaml with every
// schema default filled in as the API server does, changed by options.
func server(name string, options ...fixtures.Option) *embedopsv1.EmbeddingServer {
	s := fixtures.EmbeddingServer(testNamespace, name, options...)
	fixtures.WithDefaults()(s)
	s.Generation = 1
	return s
}

func withImage(image string, policy corev1.PullPolicy, pullSecrets ...string) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Image, s.Spec.ImagePullPolicy = image, policy
		for _, name := range pullSecrets {
			s.Spec.ImagePullSecrets = append(s.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
		}
	}
}

func withResources(requests, limits corev1.ResourceList) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
}

func withCacheSpec(mode embedopsv1.CacheMode, storageClass, size string) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.Mode, s.Spec.Cache.StorageClassName = mode, storageClass
		s.Spec.Cache.Size = ptr.To(resource.MustParse(size))
	}
}

func withServiceAccount(name string) fixtures.Option {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.ServiceAccountName = name }
}

// secretEnv is a variable read from a Secret key.
func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

// perReplicaCache is a PerReplica decision as the controller passes it.
func perReplicaCache(templateName, storageClass, size string) *builder.Cache {
	return &builder.Cache{
		Mode:             embedopsv1.CacheModePerReplica,
		TemplateName:     templateName,
		StorageClassName: storageClass,
		Size:             resource.MustParse(size),
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
	}
}

// withPopulator sets the image of the populate init container.
func withPopulator(cache *builder.Cache, image string) *builder.Cache {
	cache.PopulatorImage = image
	return cache
}

// sharedCache is a Shared decision as the controller passes it.
func sharedCache(claimName, size string) *builder.Cache {
	return &builder.Cache{
		Mode:        embedopsv1.CacheModeShared,
		ClaimName:   claimName,
		Size:        resource.MustParse(size),
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
	}
}

// existingCache is a spec.cache.existingClaim as the controller passes it.
func existingCache(claim string) *builder.Cache {
	return &builder.Cache{Mode: embedopsv1.CacheModeShared, ClaimName: claim, Existing: true}
}

// embeddingContainer returns the TEI container of a pod template.
func embeddingContainer(template corev1.PodTemplateSpec) corev1.Container {
	for _, c := range template.Spec.Containers {
		if c.Name == builder.ContainerName {
			return c
		}
	}
	panic("no embedding container")
}

// claimLabels are the labels a PerReplica claim of s must carry: the owner
// labels, the application name and, with a binding, its name; no
// app.kubernetes.io/instance, which Argo CD's label tracking reads.
func claimLabels(s *embedopsv1.EmbeddingServer, binding string) map[string]string {
	labels := map[string]string{
		"app.kubernetes.io/name":       "text-embeddings-inference",
		"app.kubernetes.io/managed-by": "embedops",
		embedopsv1.NameLabel:           s.Name,
		embedopsv1.NamespaceLabel:      s.Namespace,
	}
	if binding != "" {
		labels[embedopsv1.CacheBindingLabel] = binding
	}
	return labels
}
