package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// Names of what up creates.
const (
	// dirPrefix names up's temporary directory.
	dirPrefix = "embedops-dev-"
	// repoPath is the dev repository's path on the git server.
	repoPath = "embedops/dev.git"
	// branch is the branch the GitOps tool follows.
	branch = "main"
	// examplesPath is where the examples are in the dev repository.
	examplesPath = "examples"
	// fastStorageClass is a second StorageClass for `dev change` to move a
	// cache to.
	fastStorageClass = "fast"
)

// env is everything up runs, in start order.
type env struct {
	out  io.Writer
	opts options
	st   state
	// cluster is the kwok cluster, node the real one; one of them runs.
	cluster *harness.Cluster
	node    *harness.Node
	// config and client reach whichever runs.
	config *rest.Config
	client client.Client
	// servers are the examples' servers, read for a real node.
	servers []exampleServer
	git     *gittestserver.GitServer
	repo    *harness.GitRepo
	// seed is the commit that added the examples.
	seed string
	// gitops applies the examples: Flux or Argo CD.
	gitops        gitopsTool
	controller    *harness.ControllerProcess
	controllerLog *os.File
	// spawner holds the threads that started the GitOps tool and the
	// controller.
	spawner *spawner
}

// startEnv starts everything and seeds the repository; on failure it stops
// what it started.
func startEnv(ctx context.Context, out io.Writer, opts options) (*env, error) {
	dir, err := os.MkdirTemp("", dirPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("creating the dev directory: %w", err)
	}
	tool, err := newGitopsTool(opts.gitops)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e := &env{out: out, opts: opts, st: state{PID: os.Getpid(), Dir: dir, Namespace: opts.namespace, GitOps: opts.gitops},
		gitops: tool, spawner: newSpawner()}
	if err := claimState(opts.stateFile, &e.st); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	devLog.open(filepath.Join(dir, "dev.log"))
	if err := e.start(ctx); err != nil {
		return nil, errors.Join(err, e.stop())
	}
	return e, nil
}

// start runs the steps in order, timing each.
func (e *env) start(ctx context.Context) error {
	if _, err := os.Stat(e.opts.controller); err != nil {
		return fmt.Errorf("the controller binary is missing (run make build): %w", err)
	}
	began := time.Now()
	if err := e.startCluster(ctx); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "dev: started %s (%s)\n", e.clusterDescription(), since(began))
	for _, step := range e.steps() {
		began := time.Now()
		if err := step.run(ctx); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "dev: %s (%s)\n", step.what, since(began))
	}
	return saveState(e.opts.stateFile, &e.st)
}

// startStep is one step of a start after the cluster's.
type startStep struct {
	what string
	run  func(context.Context) error
}

// steps are the start's steps once the cluster runs.
func (e *env) steps() []startStep {
	steps := []startStep{{fmt.Sprintf("installed embedops' and %s's CRDs and the StorageClasses", e.gitops.name()), e.installCRDs}}
	if e.node != nil {
		steps = append(steps, startStep{fmt.Sprintf("started the hub stand-in (Deployment and Service %s/%s) serving the examples' models", hubNamespace, hubName), e.startHub})
	}
	return append(steps,
		startStep{"seeded the git server", e.startGit},
		startStep{fmt.Sprintf("started %s and the embedops controller", e.gitops.name()), e.startControllers},
		e.applyStep(),
	)
}

// clusterDescription says what cluster runs.
func (e *env) clusterDescription() string {
	if e.node != nil {
		return fmt.Sprintf("a real node %s in its own network namespace (containerd and the kubelet run the pods; the API server is reached through %s)", e.node.Name, e.config.Host)
	}
	return "the local kwok cluster (pods are simulated: no TEI process runs, no image is pulled)"
}

// installCRDs installs embedops' CRDs, what the GitOps tool needs before it
// starts, and the second StorageClass.
func (e *env) installCRDs(ctx context.Context) error {
	if err := operator.InstallCRDs(e.config); err != nil {
		return err
	}
	target := installTarget{config: e.config, client: e.client, kubeconfig: e.st.Kubeconfig, dir: e.gitopsDir()}
	if err := e.gitops.install(ctx, target); err != nil {
		return err
	}
	if e.node != nil {
		// The real node has both classes, CSI volumes bound once a pod
		// is scheduled.
		return nil
	}
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: fastStorageClass},
		Provisioner:       harness.ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if err := e.client.Create(ctx, class); err != nil {
		return fmt.Errorf("creating the %s StorageClass: %w", fastStorageClass, err)
	}
	return nil
}

// startGit starts the git server and commits the examples to a new
// repository on it.
func (e *env) startGit(ctx context.Context) error {
	var err error
	if e.git, err = harness.StartGitServer(filepath.Join(e.st.Dir, "git")); err != nil {
		return err
	}
	if e.repo, err = harness.CreateGitRepo(e.git, repoPath, branch); err != nil {
		return err
	}
	e.st.RepoURL = e.repo.URL
	e.seed, err = seed(ctx, e.repo, e.opts.examples, e.editExamples)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "dev: %s holds %s/ of commit %s %q by %s\n", e.repo.URL, examplesPath, short(e.seed), seedSubject, author())
	return nil
}

// editExamples adds the hub stand-in's HF_ENDPOINT to the examples'
// kustomization on a real node.
func (e *env) editExamples(files map[string]string) error {
	if e.node == nil {
		return nil
	}
	name := path.Join(examplesPath, kustomizationFile)
	kustomization, ok := files[name]
	if !ok {
		return fmt.Errorf("the examples have no %s to add HF_ENDPOINT to", kustomizationFile)
	}
	patched, changes, err := devPatches(kustomization, e.servers)
	if err != nil {
		return err
	}
	files[name] = patched
	fmt.Fprintf(e.out, "dev: on the real node, %s patches the examples (in the seeded commit, so the audit renders them): %s\n",
		name, strings.Join(changes, "; "))
	return nil
}

// stop stops everything in reverse order and removes the directory and the
// state file. It is safe to call more than once.
func (e *env) stop() error {
	var errs []error
	if e.controller != nil {
		errs = append(errs, e.controller.Stop(), e.controllerLog.Close())
		e.controller, e.controllerLog = nil, nil
	} else if e.controllerLog != nil {
		errs = append(errs, e.controllerLog.Close())
		e.controllerLog = nil
	}
	errs = append(errs, e.gitops.stop())
	e.spawner.close()
	if e.git != nil {
		e.git.StopHTTP()
		e.git = nil
	}
	if e.cluster != nil {
		errs = append(errs, e.cluster.Stop())
		e.cluster = nil
	}
	if e.node != nil {
		errs = append(errs, e.node.Stop())
		e.node = nil
	}
	devLog.close()
	if err := os.RemoveAll(e.st.Dir); err != nil {
		errs = append(errs, fmt.Errorf("removing the dev directory: %w", err))
	}
	return errors.Join(append(errs, removeStateFile(e.opts.stateFile))...)
}

// since is the time since began, rounded for people.
func since(began time.Time) time.Duration {
	return time.Since(began).Round(100 * time.Millisecond)
}
