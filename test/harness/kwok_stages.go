package harness

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"

	"sigs.k8s.io/yaml"
)

// Simulated pod states. A pod created with SimulateAnnotation set to one of
// these values gets that state from the local cluster's kwok Stages instead
// of becoming Ready; embedops users set it through the EmbeddingServer's
// spec.podTemplate metadata.annotations. The annotation is read when kwok
// first sees the pod, so removing it from the template takes effect with the
// pods of the next rollout, which become Ready as usual.
const (
	// SimulateAnnotation names the state a new pod should be put in.
	SimulateAnnotation = "embedops.dev/simulate"
	// SimulateMessageAnnotation replaces the waiting message of simulated
	// container states.
	SimulateMessageAnnotation = "embedops.dev/simulate-message"
	// SimulateRestartsAnnotation is the restartCount of CrashLoopBackOff and
	// OOMKilled simulations; 3 when unset.
	SimulateRestartsAnnotation = "embedops.dev/simulate-restarts"

	// SimulateImagePullBackOff keeps the pod Pending with its containers
	// waiting in ImagePullBackOff.
	SimulateImagePullBackOff = "ImagePullBackOff"
	// SimulateErrImagePull keeps the pod Pending with its containers waiting
	// in ErrImagePull.
	SimulateErrImagePull = "ErrImagePull"
	// SimulateCreateContainerConfigError keeps the pod Pending with its
	// containers waiting in CreateContainerConfigError.
	SimulateCreateContainerConfigError = "CreateContainerConfigError"
	// SimulateCrashLoopBackOff makes the pod Running with its containers
	// waiting in CrashLoopBackOff after restarts that ended in Error.
	SimulateCrashLoopBackOff = "CrashLoopBackOff"
	// SimulateOOMKilled is SimulateCrashLoopBackOff whose last termination
	// (lastState.terminated) has reason OOMKilled and exit code 137.
	SimulateOOMKilled = "OOMKilled"
	// SimulateNotReady makes the pod Running with its containers started but
	// never ready, as while TEI loads its model.
	SimulateNotReady = "NotReady"
)

// The result the local cluster's kwok Stages give a container named populate
// when it completes, as `embedops populate --termination-log` would write it:
// no image runs here, so the download is simulated too.
const (
	// SimulatedPopulateCommit is the simulated resolved commit.
	SimulatedPopulateCommit = "5151515151515151515151515151515151515151"
	// SimulatedPopulateDigest is the simulated content digest.
	SimulatedPopulateDigest = "sha256:5151515151515151515151515151515151515151515151515151515151515151"
	// simulatedPopulatePlaceholder is replaced by the result in the stages.
	simulatedPopulatePlaceholder = "SIMULATED_POPULATE_RESULT"
)

// UnschedulableNodeSelector returns a nodeSelector that no node of the local
// cluster matches. kwok only acts on pods bound to its nodes, so
// Unschedulable is not a Stage: a pod with this selector stays Pending and
// kube-scheduler sets its PodScheduled condition to False with reason
// Unschedulable.
func UnschedulableNodeSelector() map[string]string {
	return map[string]string{"embedops.dev/unschedulable": "true"}
}

// stageFiles are the kwok Stages of the local cluster: kwok's default node
// and pod stages (kwokctl drops its defaults when given any stage), with
// pod-ready skipping simulated pods, and the simulations.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// kwokctlConfigVersion is the apiVersion of kwokctl's configuration.
const kwokctlConfigVersion = "config.kwok.x-k8s.io/v1alpha1"

// kwokctlConfiguration is the part of kwokctl's KwokctlConfiguration the
// harness sets; kwokctl has no flags for these options.
type kwokctlConfiguration struct {
	APIVersion        string                  `json:"apiVersion"`
	Kind              string                  `json:"kind"`
	Options           kwokctlOptions          `json:"options"`
	ComponentsPatches []kwokctlComponentPatch `json:"componentsPatches"`
}

// kwokctlComponentPatch adds flags to one component (kwok's
// ComponentPatches, pkg/apis/config/v1alpha1/kwokctl_configuration_types.go).
type kwokctlComponentPatch struct {
	Name      string             `json:"name"`
	ExtraArgs []kwokctlExtraArgs `json:"extraArgs"`
}

// kwokctlExtraArgs is one flag, --key=value.
type kwokctlExtraArgs struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// serviceClusterIPRange is kube-apiserver's Service IP range. kwokctl sets
// none, and kube-apiserver's default, 10.0.0.0/24, holds 254 Services:
// fewer than the 1,000 servers (two Services each) the benchmark creates.
const serviceClusterIPRange = "10.0.0.0/16"

// auditLogMaxSize is the size, in megabytes, at which kube-apiserver would
// rotate its audit log. Its default, 0, means lumberjack's 100 MB, which a
// 1,000-server benchmark outgrows: counts read from the rotated file went
// negative. 1 TiB is never reached.
const auditLogMaxSize = "1048576"

// componentsPatches are the flags the harness adds to kwokctl's components.
// etcd skips fsync, as envtest runs it (controller-runtime v0.25.2
// pkg/internal/testing/controlplane/etcd.go, unsafe-no-fsync): a test
// cluster's data need not survive the machine, and on a loaded CI machine
// one fsync can wait a minute behind other processes' writes, so every
// write to kube-apiserver times out (a Handler timeout on the kwok
// controller's node leases, no node Ready, in one CI run) while reads
// from its watch cache still answer. A killed etcd loses nothing: its
// writes are in the kernel's page cache.
func componentsPatches() []kwokctlComponentPatch {
	return []kwokctlComponentPatch{{
		Name: "kube-apiserver",
		ExtraArgs: []kwokctlExtraArgs{
			{Key: "service-cluster-ip-range", Value: serviceClusterIPRange},
			{Key: "audit-log-maxsize", Value: auditLogMaxSize},
		},
	}, {
		Name:      "etcd",
		ExtraArgs: []kwokctlExtraArgs{{Key: "unsafe-no-fsync", Value: "true"}},
	}}
}

// kwokctlOptions are kwokctl options without flags.
type kwokctlOptions struct {
	// BindAddress is where every component listens.
	BindAddress string `json:"bindAddress"`
	// KubectlBinary is the kubectl kwokctl runs when none is in PATH.
	KubectlBinary string `json:"kubectlBinary"`
	// EtcdPeerPort is etcd's peer port.
	EtcdPeerPort uint32 `json:"etcdPeerPort"`
}

// kwokctlConfig returns the file given to kwokctl with --config: its options
// followed by every Stage in stageFiles.
func kwokctlConfig(options kwokctlOptions) ([]byte, error) {
	header, err := yaml.Marshal(kwokctlConfiguration{
		APIVersion: kwokctlConfigVersion, Kind: "KwokctlConfiguration", Options: options, ComponentsPatches: componentsPatches(),
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the kwokctl configuration: %w", err)
	}
	var out bytes.Buffer
	out.Write(header)
	names, err := fs.Glob(stageFiles, "stages/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing kwok stages: %w", err)
	}
	for _, name := range names {
		stage, err := stageFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading kwok stage %s: %w", name, err)
		}
		out.WriteString("---\n")
		out.Write(bytes.ReplaceAll(stage, []byte(simulatedPopulatePlaceholder), simulatedPopulateResult()))
	}
	return out.Bytes(), nil
}

// simulatedPopulateResult is the JSON of the simulated populate result,
// escaped for a Go template raw string in the stages.
func simulatedPopulateResult() []byte {
	return fmt.Appendf(nil, `{"resolvedCommit":"%s","contentDigest":"%s","files":1,"bytes":1}`,
		SimulatedPopulateCommit, SimulatedPopulateDigest)
}
