package harness

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The CSI snapshot API on the test clusters: the CRDs
// (snapshot.storage.k8s.io/v1) and the real snapshot-controller of
// kubernetes-csi/external-snapshotter v8.7.0, both from `make tools`
// (test/tools/snapshotter), against the cluster's kube-apiserver; the
// harness's storage plays the CSI driver and its csi-snapshotter sidecar
// (snapshotter.go). StartCluster and StartNode install and run them.

// snapshotControllerArgs are the snapshot-controller's flags
// (cmd/snapshot-controller/main.go): one replica, so no leader election;
// its metrics on httpEndpoint, served once the CRDs are found, which the
// harness probes for readiness; failed operations retried within seconds
// (--retry-interval-max defaults to 5 minutes); the client-side rate limit
// a test's bursts need; and no volume group snapshots, whose CRDs are not
// installed (the controller would wait --retry-crd-interval-max for them).
func snapshotControllerArgs(kubeconfig, httpEndpoint string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-election=false",
		"--http-endpoint=" + httpEndpoint,
		"--retry-interval-start=250ms",
		"--retry-interval-max=5s",
		"--kube-api-qps=50",
		"--kube-api-burst=100",
		"--feature-gates=CSIVolumeGroupSnapshot=false",
		"--v=2",
	}
}

// StartSnapshotController runs bin/snapshot-controller against the
// kube-apiserver kubeconfig reaches, its metrics on a free loopback port,
// its log in dir/snapshot-controller.log, and waits until it serves them:
// the snapshot CRDs must be installed (InstallSnapshotCRDs). The process
// dies with the test binary; Stop ends it. StartCluster and StartNode run
// their own.
func StartSnapshotController(ctx context.Context, kubeconfig, dir string) (*Process, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	binary, err := Binary(root, "snapshot-controller")
	if err != nil {
		return nil, err
	}
	address, err := FreeAddress()
	if err != nil {
		return nil, err
	}
	return StartProcess(ctx, ProcessOptions{
		Name:       "snapshot-controller",
		Binary:     binary,
		Args:       snapshotControllerArgs(kubeconfig, address),
		Kubeconfig: kubeconfig,
		LogPath:    filepath.Join(dir, "snapshot-controller.log"),
		ReadyURL:   "http://" + address + "/metrics",
	})
}

// SnapshotCRDPath is the directory of the snapshot CRDs
// (VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshot) that `make
// tools` copies into bin/crds/snapshot, for EnvOptions.ExtraCRDPaths.
func SnapshotCRDPath() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return Binary(root, "crds/snapshot")
}

// InstallSnapshotCRDs installs the snapshot CRDs and waits until the API
// server serves them.
func InstallSnapshotCRDs(cfg *rest.Config) error {
	path, err := SnapshotCRDPath()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{path}, ErrorIfPathMissing: true, MaxTime: crdInstallTimeout}); err != nil {
		return fmt.Errorf("installing the snapshot CRDs: %w", err)
	}
	return nil
}
