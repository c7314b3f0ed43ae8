package builder

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// The TEI container.
const (
	// ContainerName names the TEI container; spec.podTemplate patches it by
	// this name.
	ContainerName = "embedding"
	// PortName names the TEI container port and the Services' ports.
	PortName = "http"
	// MetricsPortName names TEI's Prometheus port, on the container and the
	// Services, for a PodMonitor or ServiceMonitor.
	MetricsPortName = "metrics"
	// DefaultMetricsPort is TEI's Prometheus port: --prometheus-port, env
	// PROMETHEUS_PORT, default 9000 (TEI router/src/main.rs); TEI serves
	// /metrics there with its own listener (router/src/prometheus.rs) and
	// also on the http port (router/src/http/server.rs).
	DefaultMetricsPort int32 = 9000
	// metricsPortEnv and metricsPortFlag set TEI's Prometheus port.
	metricsPortEnv  = "PROMETHEUS_PORT"
	metricsPortFlag = "--prometheus-port"
	// healthPath is TEI's health endpoint, asked by every probe.
	healthPath = "/health"
	// defaultContainerAnnotation makes kubectl logs and exec pick the TEI
	// container when a patch adds sidecars.
	defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"
)

// Schema defaults, used when a server was not defaulted by the API server
// (for example one read from a file).
const (
	defaultPort     int32 = 8080
	defaultRevision       = "main"
)

// Probe timings. TEI answers /health only once the model is downloaded and
// loaded, which can take a long time for large models on slow links.
const (
	// startupPeriodSeconds and startupFailureThreshold give a pod 10s x 360
	// = 1 hour to download and load its model before it is restarted.
	startupPeriodSeconds    = 10
	startupFailureThreshold = 360
	// probeTimeoutSeconds allows /health, which runs a one-token inference
	// until the backend has answered once (TEI v1.9.3 backends/src/lib.rs,
	// Backend::health), to answer on a busy CPU.
	probeTimeoutSeconds = 5
	// readinessPeriodSeconds and readinessFailureThreshold take a pod out of
	// the Service after 30s of failed health checks.
	readinessPeriodSeconds    = 10
	readinessFailureThreshold = 3
	// livenessPeriodSeconds and livenessFailureThreshold restart a pod whose
	// backend died within DeadBackendRestartBound; livenessTimeoutSeconds
	// lets a busy one answer late (LivenessProbe).
	livenessPeriodSeconds    = 10
	livenessFailureThreshold = 3
	livenessTimeoutSeconds   = 60
	// podGracePeriodSeconds is the pod's terminationGracePeriodSeconds,
	// which the builder leaves to the API default (kubernetes v1.37.2
	// staging/src/k8s.io/api/core/v1/types.go,
	// DefaultTerminationGracePeriodSeconds; pkg/apis/core/v1/defaults.go).
	podGracePeriodSeconds = corev1.DefaultTerminationGracePeriodSeconds
)

// DeadBackendRestartBound is how long after its backend dies a TEI
// container is restarted at the latest (LivenessProbe): failureThreshold
// failed probes a period apart, then the kill, which the pod's grace
// period bounds.
const DeadBackendRestartBound = (livenessPeriodSeconds*livenessFailureThreshold + podGracePeriodSeconds) * time.Second

// runAsID is the non-root user, group and fsGroup of TEI pods. TEI images run
// as root by default, so runAsNonRoot needs an explicit user; the fsGroup
// makes the cache volume writable by it.
const runAsID int64 = 1000

// StatefulSet returns the StatefulSet "<name>" that runs TEI, with its cache
// mounted at CacheMountPath as cache says (nil means an emptyDir) and
// spec.podTemplate applied. It fails when cache is inconsistent, and with an
// error wrapping ErrInvalidPodTemplate when the patch is.
func StatefulSet(server *embedopsv1.EmbeddingServer, cache *Cache, facts Facts) (*appsv1.StatefulSet, error) {
	template, err := PodTemplate(server, cache, facts)
	if err != nil {
		return nil, err
	}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "StatefulSet"},
		ObjectMeta: objectMeta(server, server.Name),
		Spec: appsv1.StatefulSetSpec{
			Replicas:                             new(server.GetReplicas()),
			Selector:                             &metav1.LabelSelector{MatchLabels: StatefulSetSelectorLabels(server)},
			ServiceName:                          HeadlessServiceName(server),
			PodManagementPolicy:                  appsv1.ParallelPodManagement,
			UpdateStrategy:                       rollingUpdate(),
			Template:                             *template,
			VolumeClaimTemplates:                 cache.claimTemplates(server),
			PersistentVolumeClaimRetentionPolicy: cache.claimRetention(),
		},
	}, nil
}

// rollingUpdate is the StatefulSet's update strategy, the API server's
// default (apps/v1 SetDefaults_StatefulSet) written out: partition 0 undoes
// the pause a drain sets (the controller's drainPatch) when an old
// StatefulSet becomes the server's again, so its pods roll.
func rollingUpdate() appsv1.StatefulSetUpdateStrategy {
	return appsv1.StatefulSetUpdateStrategy{
		Type:          appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: new(int32(0))},
	}
}

// PodTemplate is the pod template of the server's StatefulSet: the
// generated one with spec.podTemplate applied and checked.
func PodTemplate(server *embedopsv1.EmbeddingServer, cache *Cache, facts Facts) (*corev1.PodTemplateSpec, error) {
	if err := cache.validate(); err != nil {
		return nil, err
	}
	generated := podTemplate(server, cache, facts)
	template, err := patchPodTemplate(generated, server.Spec.PodTemplate)
	if err != nil {
		return nil, err
	}
	if err := checkPatchedPodTemplate(generated, template); err != nil {
		return nil, err
	}
	return template, nil
}

// podLabels are the children's labels plus the cache's.
func podLabels(server *embedopsv1.EmbeddingServer, cache *Cache) map[string]string {
	labels := Labels(server)
	maps.Copy(labels, cache.podLabels())
	return labels
}

// podTemplate is the generated pod template, before spec.podTemplate.
func podTemplate(server *embedopsv1.EmbeddingServer, cache *Cache, facts Facts) *corev1.PodTemplateSpec {
	spec := server.Spec
	var pullSecrets []corev1.LocalObjectReference
	if len(spec.ImagePullSecrets) > 0 {
		pullSecrets = append(pullSecrets, spec.ImagePullSecrets...)
	}
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      podLabels(server, cache),
			Annotations: map[string]string{defaultContainerAnnotation: ContainerName},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: spec.ServiceAccountName,
			ImagePullSecrets:   pullSecrets,
			// Service links would put <SERVICE>_PORT variables in the
			// environment, which TEI reads as its own flags (a Service named
			// "prometheus" sets PROMETHEUS_PORT).
			EnableServiceLinks: new(false),
			SecurityContext:    podSecurityContext(),
			InitContainers:     initContainers(server, cache),
			Containers:         []corev1.Container{container(server, cache, facts)},
			Volumes:            append(cache.podVolumes(), caBundleVolumes(server)...),
		},
	}
}

// container is the TEI container. Its command is the image's ENTRYPOINT
// (text-embeddings-router); Args replace the image's CMD, so args keeps
// what CMD said.
func container(server *embedopsv1.EmbeddingServer, cache *Cache, facts Facts) corev1.Container {
	spec := server.Spec
	return corev1.Container{
		Name:            ContainerName,
		Image:           image(server),
		ImagePullPolicy: spec.ImagePullPolicy,
		Args:            args(server, cache, facts),
		Env:             env(server),
		Ports:           containerPorts(server),
		Resources:       *spec.Resources.DeepCopy(),
		VolumeMounts:    append([]corev1.VolumeMount{cache.volumeMount()}, caBundleMounts(server)...),
		StartupProbe:    probe(startupPeriodSeconds, startupFailureThreshold),
		ReadinessProbe:  probe(readinessPeriodSeconds, readinessFailureThreshold),
		LivenessProbe:   LivenessProbe(),
		SecurityContext: containerSecurityContext(),
		Lifecycle:       DrainLifecycle(),
	}
}

// drainSeconds is how long a pod keeps serving once it is told to stop.
const drainSeconds = 5

// DrainLifecycle keeps a stopping TEI pod serving for drainSeconds before
// the kubelet sends SIGTERM. A pod's endpoint leaves the Service while the
// pod already terminates: the EndpointSlice controller marks it not ready
// and kube-proxy rewrites its rules afterwards (kubernetes.io docs, "Pod
// Lifecycle: Termination of Pods"; kube-proxy pkg/proxy/iptables
// proxier.go, v1.37.2, syncs at most every minSyncPeriod). TEI stops
// accepting connections at SIGTERM (router/src/shutdown.rs, v1.9.3: axum's
// graceful shutdown), so without the wait a client whose connection still
// follows the old rules is refused: measured on the real node, 3 of 283
// requests during a storage change (test/node). The wait is the kubelet's
// sleep action (KEP-3960, on by default since v1.30), as TEI's image has no
// shell; it counts against terminationGracePeriodSeconds (30 s by
// default), leaving TEI 25 s to finish what it accepted.
func DrainLifecycle() *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: drainSeconds}}}
}

// managedFlags are the TEI flags the builder sets; spec.args may not.
var managedFlags = []string{"--model-id", "--revision", "--port", "--hostname"}

// containerPorts are TEI's http port and, unless it is the same, its
// Prometheus port.
func containerPorts(server *embedopsv1.EmbeddingServer) []corev1.ContainerPort {
	ports := []corev1.ContainerPort{{Name: PortName, ContainerPort: port(server), Protocol: corev1.ProtocolTCP}}
	if metrics := metricsPort(server); metrics != port(server) {
		ports = append(ports, corev1.ContainerPort{Name: MetricsPortName, ContainerPort: metrics, Protocol: corev1.ProtocolTCP})
	}
	return ports
}

// metricsPort is TEI's Prometheus port: --prometheus-port in spec.args,
// else a literal PROMETHEUS_PORT in spec.env, else DefaultMetricsPort. clap
// gives the flag precedence over the variable (TEI router/src/main.rs).
func metricsPort(server *embedopsv1.EmbeddingServer) int32 {
	value := ""
	for _, e := range server.Spec.Env {
		if e.Name == metricsPortEnv && e.ValueFrom == nil {
			value = e.Value
		}
	}
	for i, arg := range server.Spec.Args {
		if v, ok := strings.CutPrefix(arg, metricsPortFlag+"="); ok {
			value = v
		} else if arg == metricsPortFlag && i+1 < len(server.Spec.Args) {
			value = server.Spec.Args[i+1]
		}
	}
	if n, err := strconv.ParseInt(value, 10, 32); err == nil && n > 0 && n < 65536 {
		return int32(n)
	}
	return DefaultMetricsPort
}

// jsonOutputFlag makes TEI log JSON. TEI's images run it as their CMD
// (Dockerfile, Dockerfile-cuda: CMD ["--json-output"], v1.9.3), which a
// container's args replace, so args says it again.
const jsonOutputFlag = "--json-output"

// jsonOutputEnv is the variable clap reads for --json-output
// (router/src/main.rs, `#[clap(long, env)] json_output: bool`).
const jsonOutputEnv = "JSON_OUTPUT"

// args are TEI's arguments: the managed flags, in managedFlags order, then
// --json-output as the image's CMD has it, then spec.args. The revision is
// the commit the populator recorded, once it did, else the spec's revision.
// --json-output is left out when spec.args or spec.env say it themselves:
// clap refuses a flag given twice (ArgAction::SetTrue, "cannot be used
// multiple times"), and a flag would override JSON_OUTPUT=false.
func args(server *embedopsv1.EmbeddingServer, cache *Cache, facts Facts) []string {
	values := []string{server.Spec.Model.Name, ServedRevision(server, cache), fmt.Sprint(port(server)), facts.listenAddress()}
	out := make([]string, 0, len(values)+1+len(server.Spec.Args))
	for i, flag := range managedFlags {
		out = append(out, flag+"="+values[i])
	}
	if !slices.Contains(server.Spec.Args, jsonOutputFlag) && len(envNamed(server.Spec.Env, jsonOutputEnv)) == 0 {
		out = append(out, jsonOutputFlag)
	}
	return append(out, server.Spec.Args...)
}

// ServedRevision is the --revision TEI runs with, which TEI reports as
// /info's model_sha (TEI router/src/lib.rs, "model_sha: revision"): the
// commit a populator recorded, else the spec's revision, defaulted.
func ServedRevision(server *embedopsv1.EmbeddingServer, cache *Cache) string {
	if commit := cache.pinnedCommit(); commit != "" {
		return commit
	}
	return revision(server)
}

// revision is the model revision, defaulted.
func revision(server *embedopsv1.EmbeddingServer) string {
	if server.Spec.Model.Revision == "" {
		return defaultRevision
	}
	return server.Spec.Model.Revision
}

// Environment variables the builder sets.
const (
	// hubCacheEnv is --huggingface-hub-cache's variable (router/src/main.rs).
	hubCacheEnv = "HUGGINGFACE_HUB_CACHE"
	// tokenEnv is --hf-token's variable (router/src/main.rs, v1.9.3). It is
	// the only token variable set: hf_token is declared
	// `conflicts_with = "hf_api_token"`, and clap counts a value read from
	// the environment as given, so HF_API_TOKEN beside it makes TEI exit.
	tokenEnv = "HF_TOKEN"
	// apiTokenEnv is the deprecated --hf-api-token's variable; never set.
	apiTokenEnv = "HF_API_TOKEN"
)

// managedEnv are the variables that locate the cache, carry the token or
// name the CA bundle; a pod template patch may not change them. The cache
// location has three names in the HuggingFace libraries.
var managedEnv = []string{hubCacheEnv, "HF_HUB_CACHE", "HF_HOME", tokenEnv, apiTokenEnv, caBundleFileEnv}

// env is TEI's environment: the cache location, the token from its Secret
// (never its value), the CA bundle's path and then spec.env. No
// HF_HUB_OFFLINE: TEI never reads it; hf-hub finds a populated file through
// refs/<revision> and asks the hub only for what is missing (hf-hub
// src/lib.rs, src/api/tokio.rs).
func env(server *embedopsv1.EmbeddingServer) []corev1.EnvVar {
	out := []corev1.EnvVar{{Name: hubCacheEnv, Value: CacheMountPath}}
	out = append(out, tokenEnvVars(server)...)
	out = append(out, caBundleEnv(server)...)
	for i := range server.Spec.Env {
		out = append(out, *server.Spec.Env[i].DeepCopy())
	}
	return out
}

// tokenEnvVars is HF_TOKEN from the token Secret (never its value), or
// nothing.
func tokenEnvVars(server *embedopsv1.EmbeddingServer) []corev1.EnvVar {
	ref := server.Spec.Model.TokenSecretRef
	if ref == nil {
		return nil
	}
	return []corev1.EnvVar{{
		Name: tokenEnv,
		ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
			Key:                  ref.Key,
		}},
	}}
}

// image is the TEI image, defaulted.
func image(server *embedopsv1.EmbeddingServer) string {
	if server.Spec.Image == "" {
		return embedopsv1.DefaultImage
	}
	return server.Spec.Image
}

// port is the TEI port.
func port(server *embedopsv1.EmbeddingServer) int32 {
	if server.Spec.Port == 0 {
		return defaultPort
	}
	return server.Spec.Port
}

// LivenessProbe asks TEI's /health with a timeout long enough for a busy
// server to answer, so that the kubelet restarts a TEI whose backend died
// and never one that is only busy. The kubelet's HTTP probe fails on a
// status outside 200-399 and on a timeout (kubernetes v1.37.2
// pkg/probe/http/http.go, DoHTTPProbe), so the two must differ in time,
// and in TEI v1.9.3 they do:
//
//   - Dead: after a backend error such as a CUDA fault the router keeps
//     its port and every command fails at once; /health, with the
//     backend's health watch false, runs a one-token batch, which fails,
//     and answers 503 (backends/src/lib.rs, Backend::health and
//     BackendThread::new; router/src/http/server.rs, health and ErrorType
//     Unhealthy). A TCP probe passes: the pod would stay Running and
//     unready for ever.
//   - Busy: /health sends BackendCommand::Health down the channel of the
//     embedding batches and waits its turn (backends/src/lib.rs), but the
//     router hands the backend one batch at a time and awaits it
//     (core/src/infer.rs, backend_task), so /health waits for at most the
//     batch being computed (at most 4 sequences on candle's CPU backend, 8
//     on ORT's: backends/candle/src/lib.rs, backends/ort/src/lib.rs,
//     max_batch_size), then answers 200. A timeout of
//     livenessTimeoutSeconds is many such batches; a backend that takes
//     longer for one is indistinguishable from a hung one, and is
//     restarted after failureThreshold timeouts. A model whose batches take
//     longer raises it with spec.podTemplate. Readiness keeps its short
//     timeout and takes a busy pod out of the Service instead.
//
// The bound: the first probe after the death comes within periodSeconds
// and the kubelet acts on failureThreshold failures in a row
// (pkg/kubelet/prober/worker.go, doProbe), 10 s x 3; it then kills the
// container within the pod's grace period, preStop included, and starts it
// again in the same sync (pkg/kubelet/kuberuntime/kuberuntime_manager.go,
// computePodActions; kuberuntime_container.go, setTerminationGracePeriod,
// as the probe sets no grace period of its own): DeadBackendRestartBound,
// 30 s + 30 s. test/node's TestDeadBackendIsRestarted and
// TestSaturatedServerIsNotRestarted check both on a real kubelet.
func LivenessProbe() *corev1.Probe {
	live := probe(livenessPeriodSeconds, livenessFailureThreshold)
	live.TimeoutSeconds = livenessTimeoutSeconds
	return live
}

// probe is an HTTP GET of healthPath on the container port.
func probe(periodSeconds, failureThreshold int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path:   healthPath,
			Port:   intstr.FromString(PortName),
			Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    periodSeconds,
		TimeoutSeconds:   probeTimeoutSeconds,
		SuccessThreshold: 1,
		FailureThreshold: failureThreshold,
	}
}

// podSecurityContext meets the restricted Pod Security Standard.
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: new(true),
		RunAsUser:    new(runAsID),
		RunAsGroup:   new(runAsID),
		FSGroup:      new(runAsID),
		// Changing ownership only on a mismatch keeps restarts fast on a
		// cache holding tens of GiB.
		FSGroupChangePolicy: new(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurityContext meets the restricted Pod Security Standard.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             new(true),
		AllowPrivilegeEscalation: new(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
