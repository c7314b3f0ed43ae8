package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"github.com/embedops/embedops/test/harness"
)

// startControllers starts the GitOps tool's processes and, at the same
// time, embedops' controller: in the real node's cluster as config/default
// installs it, else as a process. Logs go to files, or the pod's log.
func (e *env) startControllers(ctx context.Context) error {
	group, groupCtx := errgroup.WithContext(ctx)
	group.Go(func() error {
		return e.spawner.run(func() error {
			return e.gitops.start(groupCtx, e.st.Kubeconfig, e.gitopsDir())
		})
	})
	if e.node != nil {
		group.Go(func() error { return e.installOperator(groupCtx) })
	} else {
		group.Go(func() error { return e.spawner.run(func() error { return e.startControllerProcess(groupCtx) }) })
	}
	if err := group.Wait(); err != nil {
		return err
	}
	for _, p := range e.gitops.processes() {
		fmt.Fprintf(e.out, "dev: %s logs to %s\n", p.Name, p.LogPath)
	}
	if e.controller != nil {
		fmt.Fprintf(e.out, "dev: embedops controller (pid %d) logs to %s\n", e.controller.PID(), e.controllerLog.Name())
	}
	return nil
}

// startControllerProcess runs the embedops controller as a process, its
// log in a file.
func (e *env) startControllerProcess(ctx context.Context) error {
	var err error
	if e.controllerLog, err = os.Create(filepath.Join(e.st.Dir, "controller.log")); err != nil {
		return fmt.Errorf("creating the controller log: %w", err)
	}
	e.controller, err = harness.StartControllerLogging(ctx, e.opts.controller, e.st.Kubeconfig, e.controllerLog,
		"--log-encoding=console", "--progress-interval=2s")
	return err
}

// installOperator installs the operator as a user does: config/default
// with the controller image's tag set, server-side applied, until its
// Deployment is Available. Its controller runs in-cluster with its
// ServiceAccount, leader election, secure metrics, the endpoint check, and
// its own image as the populator.
func (e *env) installOperator(ctx context.Context) error {
	dir := filepath.Join(e.st.Dir, "operator")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the operator overlay: %w", err)
	}
	if err := harness.WriteOperatorOverlay(dir, controllerImageName, controllerTag); err != nil {
		return err
	}
	if err := addProgressInterval(filepath.Join(dir, "kustomization.yaml")); err != nil {
		return err
	}
	if err := harness.InstallOperator(ctx, e.client, dir); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "dev: installed the operator from config/default (image %s:%s, %s); its log: kubectl --kubeconfig %s -n %s logs deploy/%s\n",
		controllerImageName, controllerTag, progressIntervalArg, e.st.Kubeconfig, harness.OperatorNamespace, harness.OperatorDeployment)
	return nil
}

// progressIntervalArg makes the controller look at waiting servers every
// 2s instead of 30s, as the kwok path's controller process does, so the
// story does not wait on what no watch reports.
const progressIntervalArg = "--progress-interval=2s"

// addProgressInterval appends to the overlay a patch adding
// progressIntervalArg to the controller's arguments.
func addProgressInterval(kustomization string) error {
	patch := fmt.Sprintf(`patches:
  - target: {kind: Deployment, name: %s}
    patch: '[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "%s"}]'
`, harness.OperatorDeployment, progressIntervalArg)
	f, err := os.OpenFile(kustomization, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("patching the operator overlay: %w", err)
	}
	_, err = f.WriteString(patch)
	return errors.Join(err, f.Close())
}
