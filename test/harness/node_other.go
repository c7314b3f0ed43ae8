//go:build !linux

package harness

import (
	"context"
	"errors"
	"net"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeOptions adjust the real node.
type NodeOptions struct {
	SandboxImage string
	Images       []string
}

// Node is a real node; it runs on Linux only.
type Node struct {
	Name, Dir, Kubeconfig string
	Config                *rest.Config
	Client                client.Client
	Clientset             kubernetes.Interface
	Scheme                *runtime.Scheme
}

// NodeUnsupported says why this machine cannot run a real node.
func NodeUnsupported() string {
	return "a real node needs Linux: network namespaces, cgroups, containerd"
}

// StartNode fails: a real node runs on Linux only.
func StartNode(context.Context, NodeOptions) (*Node, error) {
	return nil, errors.New(NodeUnsupported())
}

// Stop does nothing.
func (n *Node) Stop() error { return nil }

// ImportImage fails: a real node runs on Linux only.
func (n *Node) ImportImage(context.Context, string) error { return errors.New(NodeUnsupported()) }

// Dial fails: a real node runs on Linux only.
func (n *Node) Dial(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New(NodeUnsupported())
}

// ServiceRouted fails: a real node runs on Linux only.
func (n *Node) ServiceRouted(context.Context, string, string) error {
	return errors.New(NodeUnsupported())
}

// MemoryUsage is empty: a real node runs on Linux only.
func (n *Node) MemoryUsage() map[string]uint64 { return nil }

// SaveLogs does nothing: a real node runs on Linux only.
func (n *Node) SaveLogs(string) error { return nil }
