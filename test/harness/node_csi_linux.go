package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// The real node's volumes are CSI volumes, which the real snapshot-
// controller needs (it snapshots only PersistentVolumes with a CSI source),
// so the kubelet mounts them through a CSI node plugin: this one, served
// from the test process as a driver's node DaemonSet serves it, registered
// with the kubelet through its plugin registration socket as
// node-driver-registrar registers one. It reports no STAGE_UNSTAGE_VOLUME,
// so NodePublishVolume bind-mounts the volume's directory (its handle) at
// the kubelet's target path, as csi-driver-host-path does; the kubelet
// applies the pod's fsGroup afterwards (the CSIDriver's fsGroupPolicy is
// File), as it does to a local volume.

// csiVersion is the CSI version the plugin registers with.
const csiVersion = "1.0.0"

// csiNodePlugin is the node side of one of the harness's driver names.
type csiNodePlugin struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	registerapi.UnimplementedRegistrationServer

	name, nodeID, volumes string
	// endpoint is the CSI socket, registration the kubelet's plugin
	// registration socket.
	endpoint, registration string
	servers                []*grpc.Server
}

// startCSINodePlugins serves the node plugins of the driver's names on
// sockets under the kubelet's root directory and registers them with the
// kubelet; stop ends them and removes their sockets. Unix socket paths are
// at most 107 bytes, so their names are short.
func startCSINodePlugins(kubeletDir, nodeID string, driver *volumeDriver) (stop func(), err error) {
	var plugins []*csiNodePlugin
	stop = func() {
		for _, p := range plugins {
			p.stop()
		}
	}
	for i, name := range driver.drivers() {
		p := &csiNodePlugin{
			name: name, nodeID: nodeID, volumes: driver.volumes,
			endpoint:     filepath.Join(kubeletDir, "plugins", fmt.Sprintf("embedops-%d", i), "csi.sock"),
			registration: filepath.Join(kubeletDir, "plugins_registry", fmt.Sprintf("embedops-%d-reg.sock", i)),
		}
		if err := p.start(); err != nil {
			stop()
			return nil, err
		}
		plugins = append(plugins, p)
	}
	return stop, nil
}

// start serves the CSI socket, then the registration socket, whose
// appearance the kubelet's plugin watcher acts on.
func (p *csiNodePlugin) start() error {
	csiServer := grpc.NewServer()
	csi.RegisterIdentityServer(csiServer, p)
	csi.RegisterNodeServer(csiServer, p)
	registrationServer := grpc.NewServer()
	registerapi.RegisterRegistrationServer(registrationServer, p)
	for _, s := range []struct {
		server *grpc.Server
		path   string
	}{{csiServer, p.endpoint}, {registrationServer, p.registration}} {
		if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
			return err
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		var config net.ListenConfig
		listener, err := config.Listen(context.Background(), "unix", s.path)
		if err != nil {
			return fmt.Errorf("serving the CSI node plugin %s: %w", p.name, err)
		}
		p.servers = append(p.servers, s.server)
		go func() { _ = s.server.Serve(listener) }()
	}
	return nil
}

// stop ends the servers, registration first, and removes the sockets.
func (p *csiNodePlugin) stop() {
	for _, s := range slices.Backward(p.servers) {
		s.Stop()
	}
	_ = os.Remove(p.registration)
	_ = os.Remove(p.endpoint)
}

// GetInfo tells the kubelet the plugin's kind, name and CSI socket.
func (p *csiNodePlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: p.name, Endpoint: p.endpoint, SupportedVersions: []string{csiVersion}}, nil
}

// NotifyRegistrationStatus hears the kubelet's verdict.
func (p *csiNodePlugin) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		return nil, status.Errorf(codes.FailedPrecondition, "the kubelet refused the plugin %s: %s", p.name, s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// GetPluginInfo names the driver.
func (p *csiNodePlugin) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: p.name, VendorVersion: "test"}, nil
}

// GetPluginCapabilities reports none: the controller side is the
// provisioner in the test process, not a CSI controller service.
func (p *csiNodePlugin) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

// Probe answers ready.
func (p *csiNodePlugin) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// NodeGetInfo names the node; volumes are pinned to it by their
// PersistentVolumes' node affinity, so no topology.
func (p *csiNodePlugin) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: p.nodeID}, nil
}

// NodeGetCapabilities reports none: no staging, no stats.
func (p *csiNodePlugin) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// NodePublishVolume bind-mounts the volume's directory at the target path,
// read-only when asked; a target already mounted is left as it is.
func (p *csiNodePlugin) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	source, target := req.GetVolumeId(), req.GetTargetPath()
	if !within(p.volumes, source) {
		return nil, status.Errorf(codes.NotFound, "volume %s is not one of the driver's volumes", source)
	}
	if target == "" || req.GetVolumeCapability().GetMount() == nil {
		return nil, status.Error(codes.InvalidArgument, "a target path and a mount capability are required")
	}
	if mounted, err := isMountPoint(target); err != nil || mounted {
		return &csi.NodePublishVolumeResponse{}, err
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating the target path: %v", err)
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind-mounting %s at %s: %v", source, target, err)
	}
	if req.GetReadonly() {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "remounting %s read-only: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target path and removes it.
func (p *csiNodePlugin) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "a target path is required")
	}
	if err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return nil, status.Errorf(codes.Internal, "unmounting %s: %v", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing %s: %v", target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// isMountPoint reports whether path is a mount point.
func isMountPoint(path string) (bool, error) {
	mounts, err := mountInfo()
	if err != nil {
		return false, status.Errorf(codes.Internal, "%v", err)
	}
	return slices.ContainsFunc(mounts, func(m mount) bool { return m.point == path }), nil
}

// csiDriverRegistered checks that the kubelet registered the driver's
// names on the node (its CSINode lists them), after which it mounts their
// volumes.
func (n *Node) csiDriverRegistered(names []string) func(context.Context) error {
	return func(ctx context.Context) error {
		node, err := n.Clientset.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, name := range names {
			if !slices.ContainsFunc(node.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == name }) {
				return fmt.Errorf("the kubelet has not registered the CSI driver %s", name)
			}
		}
		return nil
	}
}
