package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ArgoCDNamespace is the namespace Argo CD runs in, as its install manifests
// put it.
const ArgoCDNamespace = "argocd"

// ArgoCD is Argo CD v2.14 (test/tools/argocd) as a user installs it, minus
// its API server and UI: redis, the repo-server and the
// application-controller from ./bin as child processes against the local
// cluster, their logs in files.
type ArgoCD struct {
	// Redis is the cache the repo-server and the controller share.
	Redis *Process
	// RepoServer renders manifests from git.
	RepoServer *Process
	// Controller is the application-controller.
	Controller *Process
}

// StartArgoCD installs Argo CD's CRDs and its configuration into the
// namespace argocd (InstallArgoCDObjects) and runs redis, the repo-server
// and the application-controller, each on free loopback ports, their logs in
// dir/<name>.log. It waits until all three are ready.
//
// The application-controller's metrics server listens on every address
// (argo-cd controller/appcontroller.go: fmt.Sprintf("0.0.0.0:%d", metricsPort)), on a
// free port; it does not run in a network namespace of its own, because it
// must reach the API server, redis and the repo-server on loopback.
func StartArgoCD(ctx context.Context, kubeconfig, dir string) (*ArgoCD, error) {
	if err := InstallArgoCDObjects(ctx, kubeconfig, dir); err != nil {
		return nil, err
	}
	return RunArgoCD(ctx, kubeconfig, dir)
}

// RunArgoCD is StartArgoCD on a cluster where InstallArgoCDObjects ran:
// it only runs the processes.
func RunArgoCD(ctx context.Context, kubeconfig, dir string) (*ArgoCD, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	redisAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	redis, err := startRedis(ctx, dir, ports[0])
	if err != nil {
		return nil, err
	}
	repoServer, err := startRepoServer(ctx, kubeconfig, dir, redisAddr, ports[1], ports[2])
	if err != nil {
		return nil, errors.Join(err, redis.Stop())
	}
	controller, err := startApplicationController(ctx, kubeconfig, dir, redisAddr, fmt.Sprintf("127.0.0.1:%d", ports[1]), ports[3])
	if err != nil {
		return nil, errors.Join(err, repoServer.Stop(), redis.Stop())
	}
	return &ArgoCD{Redis: redis, RepoServer: repoServer, Controller: controller}, nil
}

// startRedis runs redis-server (Debian's, installed by make tools) on
// loopback without persistence, as Argo CD's manifests run it
// (manifests/base/redis: --save "" --appendonly no).
func startRedis(ctx context.Context, dir string, port uint32) (*Process, error) {
	binary, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is missing: run 'make tools' as root or apt-get install redis-server: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	return StartProcess(ctx, ProcessOptions{
		Name:    "redis-server",
		Binary:  binary,
		Args:    []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(int(port)), "--save", "", "--appendonly", "no", "--dir", dir},
		LogPath: filepath.Join(dir, "redis-server.log"),
		Ready:   func(ctx context.Context) bool { return acceptsConnections(ctx, addr) },
	})
}

// startRepoServer runs argocd-repo-server on loopback, plain gRPC (the
// controller reaches it with --repo-server-plaintext), its scratch space
// (clones, the askpass socket) under dir. GnuPG is off: nothing here signs
// commits, and it would need gpg. Its PATH has, as Argo CD's image does,
// helm and kustomize, which it runs to render (argo-cd util/helm/cmd.go,
// util/kustomize/kustomize.go), from bin/argocd-render, and bin/argocd,
// which git runs as GIT_ASKPASS for a repository's credentials (argo-cd
// util/askpass/server.go, Environ; cmd/main.go runs the helper it names in
// ARGOCD_BINARY_NAME).
func startRepoServer(ctx context.Context, kubeconfig, dir, redisAddr string, port, metricsPort uint32) (*Process, error) {
	binary, err := argoCDBinary("argocd-repo-server")
	if err != nil {
		return nil, err
	}
	renderTools, err := argoCDBinary("argocd-render")
	if err != nil {
		return nil, err
	}
	scratch := filepath.Join(dir, "argocd-repo-server")
	if err := os.MkdirAll(scratch, 0o750); err != nil {
		return nil, fmt.Errorf("creating the repo-server's directory: %w", err)
	}
	return StartProcess(ctx, ProcessOptions{
		Name:   "argocd-repo-server",
		Binary: binary,
		Args: []string{
			"--address", "127.0.0.1", "--port", strconv.Itoa(int(port)),
			"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(int(metricsPort)),
			"--disable-tls", "--redis", redisAddr,
		},
		Kubeconfig: kubeconfig,
		Env: []string{
			"ARGOCD_GPG_ENABLED=false",
			"ARGOCD_ASK_PASS_SOCK=" + filepath.Join(scratch, "askpass.sock"),
			"TMPDIR=" + scratch,
			"PATH=" + strings.Join([]string{renderTools, filepath.Dir(binary), os.Getenv("PATH")}, string(os.PathListSeparator)),
		},
		LogPath:  filepath.Join(dir, "argocd-repo-server.log"),
		ReadyURL: fmt.Sprintf("http://127.0.0.1:%d/healthz", metricsPort),
	})
}

// startApplicationController runs argocd-application-controller against
// the kubeconfig. ARGOCD_FAKE_IN_CLUSTER makes the in-cluster destination
// https://kubernetes.default.svc use the kubeconfig, so no cluster Secret
// is needed (argo-cd pkg/apis/application/v1alpha1/types.go,
// EnvVarFakeInClusterConfig).
func startApplicationController(ctx context.Context, kubeconfig, dir, redisAddr, repoServer string, metricsPort uint32) (*Process, error) {
	binary, err := argoCDBinary("argocd-application-controller")
	if err != nil {
		return nil, err
	}
	return StartProcess(ctx, ProcessOptions{
		Name:   "argocd-application-controller",
		Binary: binary,
		Args: []string{
			"--kubeconfig", kubeconfig, "--namespace", ArgoCDNamespace,
			"--repo-server", repoServer, "--repo-server-plaintext",
			"--redis", redisAddr, "--metrics-port", strconv.Itoa(int(metricsPort)),
		},
		Kubeconfig: kubeconfig,
		Env:        []string{"ARGOCD_FAKE_IN_CLUSTER=true"},
		LogPath:    filepath.Join(dir, "argocd-application-controller.log"),
		ReadyURL:   fmt.Sprintf("http://127.0.0.1:%d/healthz", metricsPort),
	})
}

// argoCDBinary is one of the symlinks to bin/argocd, a multi-call binary
// that runs the component its name says (argo-cd cmd/main.go).
func argoCDBinary(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return Binary(root, name)
}

// acceptsConnections reports whether a TCP connection to addr succeeds.
func acceptsConnections(ctx context.Context, addr string) bool {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// Processes are redis, the repo-server and the controller.
func (a *ArgoCD) Processes() []*Process { return []*Process{a.Redis, a.RepoServer, a.Controller} }

// Stop stops the controller, the repo-server, then redis.
func (a *ArgoCD) Stop() error {
	return errors.Join(a.Controller.Stop(), a.RepoServer.Stop(), a.Redis.Stop())
}

// LogTails is the end of the repo-server's and the controller's logs.
func (a *ArgoCD) LogTails() string {
	return a.RepoServer.LogTail() + "\n" + a.Controller.LogTail()
}
