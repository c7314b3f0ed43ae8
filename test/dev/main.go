// Command dev is `make dev`: the whole story on one machine. It starts a
// cluster, a git server on loopback holding a repository seeded from
// examples/, a GitOps tool (-gitops: Flux's source-controller and
// kustomize-controller, or Argo CD's repo-server and application-controller)
// and the embedops controller, each as its own process from ./bin; the tool
// applies the examples, and dev prints the servers, their bindings with the
// method and commit that decided them, and `embedops audit -A`.
//
// Where the machine can run pods (harness.NodeUnsupported), the cluster is
// a real node: images built here, the hub stand-in in the cluster, the
// examples patched to download from it, and the story ends with an
// embedding asked through kubectl port-forward. Elsewhere, or with
// -node=kwok, it is the kwok cluster: pods are simulated, no TEI process
// runs and no image is pulled.
//
// Subcommands: up (the default) holds everything until Ctrl-C or `dev down`;
// change commits an edit of one example's cache and follows its bindings;
// down stops a running up.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/embedops/embedops/test/harness"
)

// options are dev's flags.
type options struct {
	// examples is the directory whose files seed the repository.
	examples string
	// namespace is where the GitOps tool applies the examples.
	namespace string
	// gitops is the GitOps tool: flux or argocd.
	gitops string
	// stateFile tells change and down about the running up.
	stateFile string
	// controller is the embedops controller binary.
	controller string
	// timeout bounds each wait for the cluster to settle.
	timeout time.Duration
	// hold keeps everything running until interrupted.
	hold bool
	// node says where pods run: auto, real or kwok.
	node string
}

func main() {
	command, args := "up", os.Args[1:]
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		command, args = args[0], args[1:]
	}
	opts, err := parseFlags(command, args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signal.Notify(interrupts, stopSignals...)
	go func() {
		<-interrupts
		cancel()
	}()
	if err := runCommand(ctx, command, opts); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

// stopSignals stop up, as Ctrl-C and `dev down` do.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// interrupts receives stopSignals.
var interrupts = make(chan os.Signal, 1)

// takeSignals makes dev the only handler of stopSignals. A real node's
// harness stops the node on them and then kills the process with the
// signal again, which would end up before it stopped the GitOps tool and the
// controller and removed its directory and state; up stops the node
// itself, last.
func takeSignals() {
	signal.Reset(stopSignals...)
	signal.Notify(interrupts, stopSignals...)
}

// parseFlags reads the flags of command, with paths relative to the
// repository root.
func parseFlags(command string, args []string) (options, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return options{}, err
	}
	var opts options
	flags := flag.NewFlagSet("dev "+command, flag.ContinueOnError)
	flags.StringVar(&opts.examples, "examples", filepath.Join(root, "examples"), "directory whose files seed the dev repository's examples/")
	flags.StringVar(&opts.namespace, "namespace", "default", "namespace the GitOps tool applies the examples to")
	flags.StringVar(&opts.gitops, "gitops", gitopsFlux, "the GitOps tool that applies the examples: flux or argocd")
	flags.StringVar(&opts.stateFile, "state-file", filepath.Join(root, ".dev", "state.json"), "where up records what it runs, for change and down")
	flags.StringVar(&opts.controller, "controller", filepath.Join(root, "bin", "controller"), "the embedops controller binary (make build)")
	flags.DurationVar(&opts.timeout, "timeout", 5*time.Minute, "how long each wait for the cluster to settle may take")
	flags.BoolVar(&opts.hold, "hold", true, "keep everything running until interrupted")
	flags.StringVar(&opts.node, "node", nodeAuto, "where pods run: auto (a real node where the machine can run one, else kwok), real or kwok")
	if err := flags.Parse(args); err != nil {
		return options{}, err
	}
	if flags.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q: use up, change or down", flags.Args())
	}
	if _, err := newGitopsTool(opts.gitops); err != nil {
		return options{}, err
	}
	return opts, nil
}

// runCommand runs one subcommand.
func runCommand(ctx context.Context, command string, opts options) error {
	switch command {
	case "up":
		return up(ctx, os.Stdout, opts)
	case "change":
		return change(ctx, os.Stdout, opts)
	case "down":
		return down(ctx, os.Stdout, opts.stateFile)
	default:
		return fmt.Errorf("unknown command %q: use up, change or down", command)
	}
}
