package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/embedops/embedops/test/harness"
	"github.com/embedops/embedops/test/operator"
)

// Names of what up creates.
const (
	// dirPrefix names up's temporary directory.
	dirPrefix = "embedops-dev-"
	// fluxNamespace holds the GitRepository and the Kustomization, as a
	// Flux bootstrap would.
	fluxNamespace = "flux-system"
	// gitRepositoryName is the GitRepository following the dev repository.
	gitRepositoryName = "embedops-dev"
	// kustomizationName is the Kustomization applying the examples, named
	// as in gitops/flux.
	kustomizationName = "embedops-examples"
	// repoPath is the dev repository's path on the git server.
	repoPath = "embedops/dev.git"
	// branch is the branch Flux follows.
	branch = "main"
	// examplesPath is where the examples are in the dev repository.
	examplesPath = "examples"
	// fastStorageClass is a second StorageClass for `dev change` to move a
	// cache to.
	fastStorageClass = "fast"
)

// env is everything up runs, in start order.
type env struct {
	out     io.Writer
	opts    options
	st      state
	cluster *harness.Cluster
	git     *gittestserver.GitServer
	repo    *harness.GitRepo
	// seed is the commit that added the examples.
	seed          string
	flux          *harness.Flux
	controller    *harness.ControllerProcess
	controllerLog *os.File
}

// startEnv starts everything and seeds the repository; on failure it stops
// what it started.
func startEnv(ctx context.Context, out io.Writer, opts options) (*env, error) {
	dir, err := os.MkdirTemp("", dirPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("creating the dev directory: %w", err)
	}
	e := &env{out: out, opts: opts, st: state{PID: os.Getpid(), Dir: dir, Namespace: opts.namespace}}
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
	steps := []struct {
		what string
		run  func(context.Context) error
	}{
		{"started the local kwok cluster (pods are simulated: no TEI process runs, no image is pulled)", e.startCluster},
		{"installed embedops' and Flux's CRDs and the StorageClasses", e.installCRDs},
		{"seeded the git server", e.startGit},
		{"started Flux and the embedops controller", e.startControllers},
		{"created the GitRepository and the Kustomization", e.createFluxObjects},
	}
	for _, step := range steps {
		began := time.Now()
		if err := step.run(ctx); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "dev: %s (%s)\n", step.what, since(began))
	}
	return saveState(e.opts.stateFile, &e.st)
}

// startCluster starts the local cluster.
func (e *env) startCluster(ctx context.Context) error {
	var err error
	e.cluster, err = harness.StartCluster(ctx, harness.ClusterOptions{})
	if err != nil {
		return err
	}
	e.st.Kubeconfig = e.cluster.Kubeconfig
	return nil
}

// installCRDs installs embedops' and Flux's CRDs, the second StorageClass
// and Flux's namespace.
func (e *env) installCRDs(ctx context.Context) error {
	if err := operator.InstallCRDs(e.cluster.Config); err != nil {
		return err
	}
	if err := harness.InstallFluxCRDs(e.cluster.Config); err != nil {
		return err
	}
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: fastStorageClass},
		Provisioner:       harness.ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if err := e.cluster.Client.Create(ctx, class); err != nil {
		return fmt.Errorf("creating the %s StorageClass: %w", fastStorageClass, err)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace}}
	if err := e.cluster.Client.Create(ctx, namespace); err != nil {
		return fmt.Errorf("creating the %s namespace: %w", fluxNamespace, err)
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
	e.seed, err = seed(ctx, e.repo, e.opts.examples)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "dev: %s holds %s/ of commit %s %q by %s\n", e.repo.URL, examplesPath, short(e.seed), seedSubject, author())
	return nil
}

// startControllers starts Flux's controllers and embedops' as processes,
// at the same time, their logs in files.
func (e *env) startControllers(ctx context.Context) error {
	var err error
	if e.controllerLog, err = os.Create(filepath.Join(e.st.Dir, "controller.log")); err != nil {
		return fmt.Errorf("creating the controller log: %w", err)
	}
	group, groupCtx := errgroup.WithContext(ctx)
	group.Go(func() error {
		var err error
		e.flux, err = harness.StartFlux(groupCtx, e.cluster.Kubeconfig, filepath.Join(e.st.Dir, "flux"))
		return err
	})
	group.Go(func() error {
		var err error
		e.controller, err = harness.StartControllerLogging(groupCtx, e.opts.controller, e.cluster.Kubeconfig, e.controllerLog,
			"--log-encoding=console", "--progress-interval=2s")
		return err
	})
	if err := group.Wait(); err != nil {
		return err
	}
	for _, p := range e.flux.Processes() {
		fmt.Fprintf(e.out, "dev: %s logs to %s\n", p.Name, p.LogPath)
	}
	fmt.Fprintf(e.out, "dev: embedops controller (pid %d) logs to %s\n", e.controller.PID(), e.controllerLog.Name())
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
	if e.flux != nil {
		errs = append(errs, e.flux.Stop())
		e.flux = nil
	}
	if e.git != nil {
		e.git.StopHTTP()
		e.git = nil
	}
	if e.cluster != nil {
		errs = append(errs, e.cluster.Stop())
		e.cluster = nil
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
