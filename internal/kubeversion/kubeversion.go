// Package kubeversion owns the oldest Kubernetes embedops supports (Floor)
// and the check, at the controller's start, that the API server is not older.
// It reads the server's version (GET /version) and nothing else: it must not
// write to the cluster or probe features. What sets the floor is written at
// Floor; charts/embedops/Chart.yaml's kubeVersion, the README and
// test/tools/kube-floor (the API server `make test-floor` runs the envtest
// suites against) must follow it.
package kubeversion

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// Floor is the oldest Kubernetes minor embedops supports: the oldest on
// which the CRDs and the controller behave as the envtest suites of
// api/v1alpha1 and internal/controller require (make test-floor runs them
// against it). Older API servers differ in what embedops relies on:
//   - before 1.34 a StatefulSet's pod template is not validated as a pod's
//     (k8s.io/kubernetes pkg/apis/apps/validation,
//     ValidatePodTemplateSpecForStatefulSet: a TODO up to v1.33.13), so an
//     invalid spec.podTemplate, such as requests above limits, is written to
//     the serving StatefulSet, whose pods then cannot be created, rather than
//     refused with ConfigurationInvalid while the old pods serve;
//   - before 1.32.4 CEL's cidr().containsCIDR() compares unmasked addresses
//     (kubernetes#130450), so spec.networkPolicy refuses a valid
//     ipBlock.except such as 10.1.0.0/16 inside 10.0.0.0/8;
//   - before 1.31 a new CRD may not call isCIDR or cidr() (new CEL rules
//     compile at the previous minor's library, k8s.io/apiserver
//     pkg/cel/environment), so the EmbeddingServer CRD is refused;
//   - before 1.30 the TEI pods' preStop sleep action (builder.DrainLifecycle,
//     feature gate PodLifecycleSleepAction: beta in 1.30, GA in 1.34) is
//     dropped silently.
const Floor = "1.34"

// floor is Floor parsed.
var floor = version.MustParseMajorMinor(Floor)

// Server is the API server's version as Check found it.
type Server struct {
	// GitVersion is what the server reports, e.g. v1.34.4-gke.100.
	GitVersion string
	// Compared is false for a version that was not compared with Floor: a
	// build that carries none (v0.0.0, as an unstamped `go build` of
	// k8s.io/kubernetes reports) or one that does not parse.
	Compared bool
}

// Compare returns an error when gitVersion, an API server's version such as
// v1.34.0-gke.100 or v1.33.9+k3s1, is older than Floor. Only the major and
// minor count, so a pre-release of the floor's minor passes. A version that
// does not parse or has no major (v0.0.0) is not compared, and passes;
// compared says so.
func Compare(gitVersion string) (compared bool, err error) {
	found, err := version.ParseGeneric(gitVersion)
	if err != nil || found.Major() == 0 {
		return false, nil
	}
	if version.MajorMinor(found.Major(), found.Minor()).LessThan(floor) {
		return true, fmt.Errorf("the API server runs Kubernetes %s, older than %s, the oldest embedops supports "+
			"(the README's \"Supported Kubernetes versions\" says what older ones refuse or let through): "+
			"upgrade the cluster to %s or later", gitVersion, Floor, Floor)
	}
	return true, nil
}

// Check reads the API server's version through discovery and returns an
// error when it is older than Floor (Compare).
func Check(client discovery.ServerVersionInterface) (Server, error) {
	info, err := client.ServerVersion()
	if err != nil {
		return Server{}, fmt.Errorf("reading the API server's Kubernetes version: %w", err)
	}
	compared, err := Compare(info.GitVersion)
	return Server{GitVersion: info.GitVersion, Compared: compared}, err
}

// requestTimeout bounds CheckConfig's request.
const requestTimeout = 30 * time.Second

// CheckConfig is Check through a discovery client for cfg.
func CheckConfig(cfg *rest.Config) (Server, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = requestTimeout
	client, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return Server{}, fmt.Errorf("creating a discovery client: %w", err)
	}
	return Check(client)
}
