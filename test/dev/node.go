package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// Where pods run (the -node flag).
const (
	// nodeAuto runs a real node where the machine can, kwok elsewhere.
	nodeAuto = "auto"
	// nodeReal requires a real node.
	nodeReal = "real"
	// nodeKwok simulates pods with kwok.
	nodeKwok = "kwok"
)

// gpuResource is the extended resource the advanced example asks for.
const gpuResource = "nvidia.com/gpu"

// useRealNode says whether up starts a real node for mode, and why not.
func useRealNode(mode string, unsupported func() string) (bool, string, error) {
	switch mode {
	case nodeKwok:
		return false, "-node=kwok", nil
	case nodeReal, nodeAuto:
		reason := unsupported()
		if reason == "" {
			return true, "", nil
		}
		if mode == nodeReal {
			return false, "", fmt.Errorf("-node=real: %s", reason)
		}
		return false, reason, nil
	default:
		return false, "", fmt.Errorf("-node=%s: use auto, real or kwok", mode)
	}
}

// startCluster starts a real node where it can, else the kwok cluster.
func (e *env) startCluster(ctx context.Context) error {
	real, reason, err := useRealNode(e.opts.node, harness.NodeUnsupported)
	if err != nil {
		return err
	}
	if real {
		err := e.startNode(ctx)
		if err == nil || e.opts.node == nodeReal || ctx.Err() != nil {
			return err
		}
		if reason, err = e.abandonNode(err); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.out, "dev: pods are simulated by kwok (no TEI process runs, no image is pulled): %s\n", reason)
	return e.startKwok(ctx)
}

// abandonNode logs why the real node did not start, stops it if it had,
// and returns the reason to print.
func (e *env) abandonNode(failure error) (string, error) {
	_, _ = devLog.Write([]byte(failure.Error() + "\n"))
	reason := "the real node did not start: " + firstLine(failure.Error()) + " (all of it in dev.log)"
	if e.node == nil {
		return reason, nil
	}
	// Started, then failed to offer a GPU: not kept beside kwok.
	err := e.node.Stop()
	e.node, e.st.Real = nil, false
	return reason, err
}

// startKwok starts the local kwok cluster.
func (e *env) startKwok(ctx context.Context) error {
	cluster, err := harness.StartCluster(ctx, harness.ClusterOptions{})
	if err != nil {
		return err
	}
	e.cluster, e.st.Kubeconfig, e.config, e.client = cluster, cluster.Kubeconfig, cluster.Config, cluster.Client
	return nil
}

// startNode builds the images, starts a real node with them and
// advertises a GPU for the advanced example.
func (e *env) startNode(ctx context.Context) error {
	servers, err := exampleServers(e.opts.examples)
	if err != nil {
		return err
	}
	began := time.Now()
	archives, err := harness.BuildImages(ctx, filepath.Join(e.st.Dir, "images"), realImages()...)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "dev: built the images (%s): the sandbox, %s:%s (controller and populator), the hub stand-in, the TEI stand-in as %s and %s\n",
		since(began), controllerImageName, controllerTag, embedopsv1.DefaultImage, strings.Join(harness.TEICUDAImage.RefExamples, ", ")+"'s image")
	fmt.Fprintln(e.out, "dev: starting a real node (one per machine at a time: this waits while another, such as test/node's, runs)")
	node, err := harness.StartNode(ctx, harness.NodeOptions{SandboxImage: harness.PauseImage.Ref, Images: archives})
	if err != nil {
		return err
	}
	e.node, e.servers, e.st.Real = node, servers, true
	e.st.Kubeconfig, e.config, e.client = node.Kubeconfig, node.Config, node.Client
	return e.advertiseGPU(ctx)
}

// advertiseGPU adds one nvidia.com/gpu to the node's capacity, as the
// Kubernetes task "Advertise Extended Resources for a Node" does, so the
// advanced example's pod is scheduled. No device exists: the TEI stand-in
// runs on the CPU under the CUDA image's name.
func (e *env) advertiseGPU(ctx context.Context) error {
	patch := fmt.Sprintf(`[{"op":"add","path":"/status/capacity/%s","value":"1"}]`, strings.ReplaceAll(gpuResource, "/", "~1"))
	_, err := e.node.Clientset.CoreV1().Nodes().Patch(ctx, e.node.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("advertising a GPU on the node: %w", err)
	}
	return poll(ctx, e.opts.timeout, "the node to offer a GPU", func(ctx context.Context) error {
		node, err := e.node.Clientset.CoreV1().Nodes().Get(ctx, e.node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q, ok := node.Status.Allocatable[gpuResource]; !ok || q.IsZero() {
			return errors.New("the node's allocatable has no " + gpuResource)
		}
		return nil
	})
}

// poll retries condition every pollInterval until it returns nil, for at
// most timeout, and returns its last error otherwise.
func poll(ctx context.Context, timeout time.Duration, what string, condition func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		last = condition(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, errors.Join(err, last))
	}
	return nil
}

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
