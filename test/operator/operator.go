// Package operator runs embedops itself in tests, benchmarks and make dev:
// it installs the CRDs and the server finalizer policy and starts the
// manager in-process. It is apart from
// test/harness because internal/controller's own tests use the harness.
package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/internal/controller"
	"github.com/embedops/embedops/test/fixtures"
	"github.com/embedops/embedops/test/harness"
)

// Install installs what config/default installs for the whole cluster
// besides the controller: the CRDs (InstallCRDs) and config/admission's
// policy that adds the server finalizer when a server is created.
func Install(cfg *rest.Config) error {
	if err := InstallCRDs(cfg); err != nil {
		return err
	}
	if err := installAdmission(cfg); err != nil {
		return err
	}
	return waitUntilAdmitted(cfg)
}

// admissionTimeout bounds how long the API server may take to serve the
// new CRDs and load the policy (it watches policies, as it does CRDs).
const admissionTimeout = time.Minute

// waitUntilAdmitted waits until a server-side dry run of a server's
// creation succeeds with the finalizer: discovery lists a CRD a moment
// before its handler serves it, and the policy applies once the API server
// has loaded it, so a test's first server could otherwise meet either.
func waitUntilAdmitted(cfg *rest.Config) error {
	scheme, err := controller.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), admissionTimeout)
	defer cancel()
	var last error
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		probe := fixtures.EmbeddingServer(metav1.NamespaceDefault, "admission-probe")
		last = c.Create(ctx, probe, client.DryRunAll)
		if last == nil && !controllerutil.ContainsFinalizer(probe, embedopsv1.ServerFinalizer) {
			last = errors.New("the policy did not add the finalizer yet")
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until a server is admitted with its finalizer: %w", errors.Join(err, last))
	}
	return nil
}

// installAdmission server-side applies config/admission as `kubectl apply
// --server-side -k config/admission` does.
func installAdmission(cfg *rest.Config) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	objects, err := harness.RenderOperator(filepath.Join(root, "config", "admission"))
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	for _, obj := range objects {
		err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(harness.OperatorFieldManager), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// InstallCRDs installs embedops' CRDs from config/crd/bases and waits until
// the API server serves them.
func InstallCRDs(cfg *rest.Config) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the CRDs: %w", err)
	}
	return nil
}

// Run runs embedops' manager in this process, as `make run`
// would, and returns a function that stops it.
func Run(cfg *rest.Config, opts controller.ManagerOptions) (func(), error) {
	mgr, err := controller.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controller.SetupReconcilers(ctx, mgr, opts); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "the manager stopped with:", err)
		}
	}, nil
}
