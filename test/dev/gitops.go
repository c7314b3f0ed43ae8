package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
)

// The GitOps tools dev can run (-gitops).
const (
	gitopsFlux   = "flux"
	gitopsArgoCD = "argocd"
)

// gitopsTool is the GitOps tool that applies the dev repository's
// examples: its processes and objects for up, and what change and down
// ask of it, from up's state.
type gitopsTool interface {
	// name is the tool as people call it.
	name() string
	// install installs what the tool needs before it starts.
	install(ctx context.Context, target installTarget) error
	// start runs the tool's processes against kubeconfig, logs in dir.
	start(ctx context.Context, kubeconfig, dir string) error
	// processes are the running processes, for their log paths.
	processes() []*harness.Process
	// objects names what apply creates.
	objects() string
	// apply creates the objects making the tool apply the examples of the
	// repository at url to namespace.
	apply(ctx context.Context, c client.Client, url, namespace string) error
	// notApplied says why commit is not yet applied and healthy; empty
	// when it is.
	notApplied(ctx context.Context, c client.Client, commit string) string
	// refresh asks the tool to fetch the repository now, as a git host's
	// webhook would, not at its next interval.
	refresh(ctx context.Context, c client.Client) error
	// logTails is the end of the tool's logs, for a failed run.
	logTails() string
	// stop stops the processes; it is safe to call more than once.
	stop() error
}

// installTarget is the cluster a tool installs into, and a directory for
// the files it writes.
type installTarget struct {
	config     *rest.Config
	client     client.Client
	kubeconfig string
	dir        string
}

// newGitopsTool is the tool named name; an empty name, as in a state file
// written before -gitops existed, is Flux.
func newGitopsTool(name string) (gitopsTool, error) {
	switch name {
	case gitopsFlux, "":
		return &fluxTool{}, nil
	case gitopsArgoCD:
		return &argoCDTool{}, nil
	default:
		return nil, fmt.Errorf("unknown GitOps tool %q: use %s or %s", name, gitopsFlux, gitopsArgoCD)
	}
}

// gitopsDir is the tool's directory under up's, for its logs and scratch
// files.
func (e *env) gitopsDir() string {
	return filepath.Join(e.st.Dir, cmp.Or(e.opts.gitops, gitopsFlux))
}
