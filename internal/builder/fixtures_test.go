package builder_test

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/builder"
)

const testNamespace = "models"

// serverOption changes a test server.
type serverOption func(*embedopsv1.EmbeddingServer)

// server returns the EmbeddingServer of examples/minimal.yaml with every
// schema default filled in as the API server does, changed by options.
func server(name string, options ...serverOption) *embedopsv1.EmbeddingServer {
	s := &embedopsv1.EmbeddingServer{
		TypeMeta:   metav1.TypeMeta{APIVersion: embedopsv1.GroupVersion.String(), Kind: embedopsv1.EmbeddingServerKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Generation: 1},
		Spec: embedopsv1.EmbeddingServerSpec{
			Model:    embedopsv1.ModelSpec{Name: "BAAI/bge-small-en-v1.5", Revision: "main"},
			Image:    embedopsv1.DefaultImage,
			Port:     8080,
			Replicas: new(int32(1)),
			Cache: embedopsv1.CacheSpec{
				Mode:      embedopsv1.CacheModePerReplica,
				Size:      ptr.To(resource.MustParse("10Gi")),
				RetainFor: &metav1.Duration{Duration: 24 * time.Hour},
			},
		},
	}
	for _, option := range options {
		option(s)
	}
	return s
}

func withModel(name, revision string) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Model.Name, s.Spec.Model.Revision = name, revision }
}

func withToken(secret, key string) serverOption {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Model.TokenSecretRef = &embedopsv1.SecretKeyRef{Name: secret, Key: key}
	}
}

func withImage(image string, policy corev1.PullPolicy, pullSecrets ...string) serverOption {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Image, s.Spec.ImagePullPolicy = image, policy
		for _, name := range pullSecrets {
			s.Spec.ImagePullSecrets = append(s.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
		}
	}
}

func withPort(port int32) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Port = port }
}

func withReplicas(replicas int32) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Replicas = new(replicas) }
}

func withArgs(args ...string) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Args = append(s.Spec.Args, args...) }
}

func withEnv(env ...corev1.EnvVar) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.Env = append(s.Spec.Env, env...) }
}

func withResources(requests, limits corev1.ResourceList) serverOption {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
}

func withCacheSpec(mode embedopsv1.CacheMode, storageClass, size string) serverOption {
	return func(s *embedopsv1.EmbeddingServer) {
		s.Spec.Cache.Mode, s.Spec.Cache.StorageClassName = mode, storageClass
		s.Spec.Cache.Size = ptr.To(resource.MustParse(size))
	}
}

func withServiceAccount(name string) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.ServiceAccountName = name }
}

func withPodTemplate(patch string) serverOption {
	return func(s *embedopsv1.EmbeddingServer) { s.Spec.PodTemplate = &apiextensionsv1.JSON{Raw: []byte(patch)} }
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

// embeddingContainer returns the TEI container of a pod template.
func embeddingContainer(template corev1.PodTemplateSpec) corev1.Container {
	for _, c := range template.Spec.Containers {
		if c.Name == builder.ContainerName {
			return c
		}
	}
	panic("no embedding container")
}
