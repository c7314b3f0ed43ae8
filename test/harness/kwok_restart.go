package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// apiServerComponent is kwokctl's name for kube-apiserver.
const apiServerComponent = "kube-apiserver"

// restartTimeout bounds StopAPIServer and StartAPIServer when their context
// has no earlier deadline; kube-apiserver starts in about 5s on 2 cores.
const restartTimeout = 2 * time.Minute

// StopAPIServer ends the cluster's kube-apiserver with signal (SIGKILL for a
// crash, SIGTERM for a graceful stop) and waits until it has exited. etcd and
// the other components keep running and retry until StartAPIServer.
func (c *Cluster) StopAPIServer(ctx context.Context, signal syscall.Signal) error {
	return c.StopComponent(ctx, apiServerComponent, signal)
}

// StopComponent ends one of the cluster's components (kwokctl's name, e.g.
// kube-controller-manager) with signal and waits until it has exited;
// StartAPIServer starts it again.
func (c *Cluster) StopComponent(ctx context.Context, name string, signal syscall.Signal) error {
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	pid, ok := c.componentPIDs()[name]
	if !ok || !c.isComponent(pid) {
		return fmt.Errorf("stopping %s: it is not running", name)
	}
	if err := syscall.Kill(pid, signal); err != nil {
		return fmt.Errorf("stopping %s: %w", name, err)
	}
	return c.poll(ctx, name+" to exit", func(context.Context) error {
		if c.isComponent(pid) {
			return fmt.Errorf("process %d is running", pid)
		}
		return nil
	})
}

// StartAPIServer starts kube-apiserver, and every other component that is
// not running, again with the arguments kwokctl created them with (`kwokctl
// start cluster`) and waits until kube-apiserver is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	if err := c.startStopped(ctx); err != nil {
		return fmt.Errorf("starting kube-apiserver: %w\n%s", err, c.ComponentLogs(logTailLines))
	}
	return c.poll(ctx, "kube-apiserver to be ready again", c.apiServerReady)
}

// startStopped starts every component that is not running with the
// arguments kwokctl created it with (`kwokctl start cluster`).
func (c *Cluster) startStopped(ctx context.Context) error {
	// kwokctl starts a component only when its pid file names no process
	// answering signal 0, which an unreaped zombie does: drop those files.
	for _, name := range c.StoppedComponents() {
		if err := os.Remove(c.pidFile(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the pid file of %s: %w", name, err)
		}
	}
	return c.run(ctx, "start", "cluster")
}

// supervised wraps a startup condition: while it does not hold, components
// that exited are started again, as a kubelet restarts a static pod. On a
// loaded machine etcd can answer slowly for the first minute, and
// kube-controller-manager exits when kube-apiserver is not healthy within
// its first seconds; nothing would create the default ServiceAccount then.
func (c *Cluster) supervised(condition func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		err := condition(ctx)
		if err == nil {
			return nil
		}
		if started, startErr := c.StartExited(ctx); startErr != nil || len(started) > 0 {
			return errors.Join(err, startErr, fmt.Errorf("started %v again", started))
		}
		return err
	}
}

// StartExited starts again, with the arguments kwokctl created them with,
// the components that exited, as a kubelet restarts a control plane's
// static pods, and names them. kube-controller-manager and kube-scheduler
// exit when they cannot renew their lease within their renew deadline
// (10s), which a loaded machine's slow etcd can make them miss.
func (c *Cluster) StartExited(ctx context.Context) ([]string, error) {
	stopped := c.StoppedComponents()
	if len(stopped) == 0 {
		return nil, nil
	}
	if err := c.startStopped(ctx); err != nil {
		return stopped, fmt.Errorf("starting %v again: %w", stopped, err)
	}
	return stopped, nil
}

// RestartAPIServer stops kube-apiserver with signal and starts it again.
func (c *Cluster) RestartAPIServer(ctx context.Context, signal syscall.Signal) error {
	if err := c.StopAPIServer(ctx, signal); err != nil {
		return err
	}
	return c.StartAPIServer(ctx)
}

// StoppedComponents names the cluster's components that are not running,
// e.g. kube-controller-manager after losing its lease while kube-apiserver
// was down; StartAPIServer starts them too.
func (c *Cluster) StoppedComponents() []string {
	pids := c.componentPIDs()
	var stopped []string
	for _, name := range clusterComponents {
		if pid, ok := pids[name]; !ok || !c.isComponent(pid) {
			stopped = append(stopped, name)
		}
	}
	return stopped
}

// pidFile is where kwokctl records a component's process id.
func (c *Cluster) pidFile(component string) string {
	return filepath.Join(c.clusterDir(), "pids", component+".pid")
}
