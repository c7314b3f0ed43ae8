package builder

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// The populate init container.
const (
	// PopulateContainerName names the init container that downloads the
	// model into a PerReplica claim; the controller reads its termination
	// message.
	PopulateContainerName = "populate"
	// TerminationLogPath is where the populate init container writes its
	// result, as JSON, for the kubelet to keep as its termination message.
	TerminationLogPath = "/dev/termination-log"
)

// populateResources are modest: the populator streams files to disk.
var populateResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("128Mi"),
	},
	Limits: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("512Mi"),
	},
}

// initContainers are the pod's init containers: populate when the cache
// asks for it, else none.
func initContainers(server *embedopsv1.EmbeddingServer, cache *Cache) []corev1.Container {
	if !cache.populates() {
		return nil
	}
	return []corev1.Container{populateContainer(server, cache, []string{"--image", image(server)})}
}

// PruneFlag asks `embedops populate` to prune, which it does only when
// asked: the controller gives it to every populator that fills a claim.
const PruneFlag = "--prune"

// populateContainer runs `embedops populate` on the cache at the revision
// TEI runs, downloading what selection says (the files TEI's image reads,
// or what every backend reads), with the hub, network and token settings
// TEI gets (downloaderEnv) and the CA bundle mounted as in TEI. Its claim
// has one writer at a time (a PerReplica claim its one pod, a Shared claim
// its Job, which replaces a pod only once it failed), so it prunes
// (PruneFlag): before it fetches a new commit it deletes the revisions
// older than the one the claim last served, as huggingface_hub deletes a
// revision (utils/_cache_manager.py, HFCacheInfo.delete_revisions;
// populate, Pruning), and reports the room left in its termination message.
func populateContainer(server *embedopsv1.EmbeddingServer, cache *Cache, selection []string) corev1.Container {
	command := []string{
		"/embedops", "populate",
		"--model", server.Spec.Model.Name,
		"--revision", ServedRevision(server, cache),
	}
	command = append(command, selection...)
	command = append(command, PruneFlag, "--dir", CacheMountPath, "--termination-log", TerminationLogPath)
	return corev1.Container{
		Name:  PopulateContainerName,
		Image: cache.PopulatorImage,
		// Set, never defaulted: the API server defaults a ":latest" or
		// untagged image to Always (k8s pkg/apis/core/v1/defaults.go,
		// SetDefaults_Container), and the populator image is the
		// controller's own, which config/manager runs IfNotPresent as
		// embedops-controller:latest. Always would make every pod start
		// and populate Job need the registry.
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  command,
		Env:                      downloaderEnv(server),
		Resources:                *populateResources.DeepCopy(),
		VolumeMounts:             append([]corev1.VolumeMount{cache.volumeMount()}, caBundleMounts(server)...),
		TerminationMessagePath:   TerminationLogPath,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurityContext(),
	}
}

// ResolvesFirst reports whether a PerReplica cache's binding runs a resolve
// Job before the StatefulSet starts: with a populator, on a revision that
// is not a commit yet, and before the binding recorded its commit. TEI
// then starts on --revision=<commit> at once; resolving in each pod's init
// container instead would start the first pods on the branch and roll
// every pod again when the commit is recorded.
func ResolvesFirst(server *embedopsv1.EmbeddingServer, cache *Cache) bool {
	return cache != nil && cache.mode() == embedopsv1.CacheModePerReplica && cache.Populated() &&
		cache.ResolvedCommit == "" && !commitPattern.MatchString(revision(server))
}

// resolveContainer runs `embedops populate --resolve-only`: it asks the hub
// which commit the revision names, with the settings the downloader has,
// and writes that and what the commit lists for the server's image (the
// files the init containers will cache, and their bytes) to its
// termination message, so the room for the revision is checked before any
// pod downloads it; it caches nothing and mounts no cache.
func resolveContainer(server *embedopsv1.EmbeddingServer, cache *Cache) corev1.Container {
	container := populateContainer(server, cache, nil)
	container.Command = []string{
		"/embedops", "populate",
		"--model", server.Spec.Model.Name,
		"--revision", revision(server),
		"--image", image(server),
		"--resolve-only", "--termination-log", TerminationLogPath,
	}
	container.VolumeMounts = caBundleMounts(server)
	return container
}

// verifyContainer runs `embedops populate --verify-only` on an existing
// claim: it checks, as TEI's hf-hub will look the files up
// (refs/<revision> -> snapshots/<commit>/<file>, hf-hub src/lib.rs
// CacheRepo::get), that the claim holds what the server's image reads, and
// writes the commit it found, or what is missing, to its termination
// message. It gets no environment: no token, no hub endpoint, no proxy, so
// it needs no network and a token Secret is never mounted for it. The
// claim is mounted read-only (Cache.readOnly).
func verifyContainer(server *embedopsv1.EmbeddingServer, cache *Cache) corev1.Container {
	container := populateContainer(server, cache, nil)
	container.Command = []string{
		"/embedops", "populate",
		"--model", server.Spec.Model.Name,
		"--revision", revision(server),
		"--image", image(server),
		"--dir", CacheMountPath, "--verify-only",
		"--termination-log", TerminationLogPath,
	}
	container.Env = nil
	container.VolumeMounts = []corev1.VolumeMount{cache.volumeMount()}
	return container
}

// downloaderEnv is what the downloader reads of TEI's environment: HF_TOKEN
// from its Secret, SSL_CERT_FILE for the CA bundle, and the spec.env
// variables that say where the hub is and how to reach it
// (isDownloaderSetting), values and valueFrom alike.
func downloaderEnv(server *embedopsv1.EmbeddingServer) []corev1.EnvVar {
	out := tokenEnvVars(server)
	out = append(out, caBundleEnv(server)...)
	for i := range server.Spec.Env {
		if isDownloaderSetting(server.Spec.Env[i].Name) {
			out = append(out, *server.Spec.Env[i].DeepCopy())
		}
	}
	return out
}

// proxyEnv are the proxy variables TEI's HTTP client reads (reqwest
// src/proxy.rs: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY and their lower
// case forms), as does the populator (golang.org/x/net/http/httpproxy).
var proxyEnv = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
	"http_proxy", "https_proxy", "all_proxy", "no_proxy",
}

// isDownloaderSetting reports whether a TEI variable also steers the
// download: HF_ENDPOINT (hf-hub v0.4 src/api/tokio.rs,
// ApiBuilder::from_env, which TEI router/src/lib.rs builds its hub client
// with), every HF_HUB_* variable (TEI router/src/lib.rs reads
// HF_HUB_USER_AGENT_ORIGIN; huggingface_hub's constants.py defines the
// family), and the proxies.
func isDownloaderSetting(name string) bool {
	return name == hubEndpointEnvName || strings.HasPrefix(name, "HF_HUB_") || slices.Contains(proxyEnv, name)
}
