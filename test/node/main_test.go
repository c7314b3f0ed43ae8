//go:build linux

package node

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/embedops/embedops/test/harness"
)

// podcheck is the test pods' image: `podcheck <command>`.
var podcheck = harness.ImageArchive{Package: "./test/node/podcheck", Binary: "/podcheck", User: "65534:65534", Ref: "embedops-podcheck:test"}

// podcheckImage is its name.
var podcheckImage = podcheck.Ref

// node is the package's real node; nil when the machine cannot run one.
var node *harness.Node

// skipReason says why node is nil.
var skipReason string

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the node, runs the tests and stops the node.
func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	runTogether()
	if skipReason = harness.NodeUnsupported(); skipReason != "" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "embedops-node-images-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	archives, err := buildImages(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	began := time.Now()
	node, err = harness.StartUnlessSignalled(ctx, func(ctx context.Context) (*harness.Node, error) {
		return harness.StartNode(ctx, harness.NodeOptions{SandboxImage: harness.PauseImage.Ref, Images: archives})
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("node: %s started in %s (%s)\n", node.Name, time.Since(began).Round(time.Millisecond), node.Dir)
	done := harness.StopOnSignal("the node", node.Stop)
	code := 1
	if err := installOperator(ctx, filepath.Join(dir, "operator")); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	printMemory(node.MemoryUsage())
	if code != 0 {
		logs := filepath.Join(os.TempDir(), node.Name+"-logs")
		if err := node.SaveLogs(logs); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		fmt.Println("node: component logs kept in", logs)
	}
	done()
	stopping := time.Now()
	if err := node.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the node:", err)
		return 1
	}
	fmt.Printf("node: stopped and torn down in %s\n", time.Since(stopping).Round(time.Millisecond))
	return code
}

// buildImages builds the node's images (harness.NodeImages: the sandbox,
// the controller, the hub and TEI stand-ins) and podcheck's in dir.
func buildImages(ctx context.Context, dir string) ([]string, error) {
	podcheck := podcheck
	podcheck.File = "podcheck.tar"
	images := harness.NodeImages()
	for i := range images {
		if images[i].Ref == harness.ControllerImageRef {
			images[i].ExtraRefs = append(images[i].ExtraRefs, installedControllerImage)
		}
	}
	began := time.Now()
	archives, err := harness.BuildImages(ctx, dir, append(images, podcheck)...)
	if err == nil {
		fmt.Printf("node: built %d images in %s\n", len(archives), time.Since(began).Round(time.Millisecond))
	}
	return archives, err
}

// installOperator installs the operator from config/default as a user
// does (operatorOverlay) and waits until its controller is Available.
func installOperator(ctx context.Context, dir string) error {
	began := time.Now()
	if err := operatorOverlay(dir); err != nil {
		return err
	}
	if err := harness.InstallOperator(ctx, node.Client, dir); err != nil {
		return err
	}
	fmt.Printf("node: operator installed and Available in %s\n", time.Since(began).Round(time.Millisecond))
	return nil
}

// printMemory prints the node's memory by component, in MiB.
func printMemory(usage map[string]uint64) {
	names := slices.Sorted(maps.Keys(usage))
	var total uint64
	var parts []string
	for _, name := range names {
		total += usage[name]
		parts = append(parts, fmt.Sprintf("%s %d", name, usage[name]>>20))
	}
	fmt.Printf("node: memory %d MiB: %s\n", total>>20, strings.Join(parts, ", "))
}

// nodeParallel is how many tests marked parallel run at once: they wait
// on pods (probes every 10 s), not on the CPU, so GOMAXPROCS, -parallel's
// default, would serialize waits.
const nodeParallel = "8"

// runTogether sets -parallel to nodeParallel unless it was given.
func runTogether() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", nodeParallel)
	}
}

// requireNode skips the test when the machine cannot run a node.
func requireNode(t *testing.T) {
	t.Helper()
	if node == nil {
		t.Skip(skipReason)
	}
}
