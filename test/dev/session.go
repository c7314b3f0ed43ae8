package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/embedops/embedops/internal/cli"
	"github.com/embedops/embedops/test/harness"
)

// pollInterval is how often dev looks at the cluster while it waits.
const pollInterval = 500 * time.Millisecond

// session reaches a running up's cluster: up's own, or change's.
type session struct {
	out    io.Writer
	client client.WithWatch
	st     *state
}

// newSession connects to the cluster of st.
func newSession(out io.Writer, st *state) (*session, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading the dev kubeconfig: %w", err)
	}
	scheme, err := harness.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the dev cluster: %w", err)
	}
	return &session{out: out, client: c, st: st}, nil
}

// revisionOf is how source-controller writes a commit on branch.
func revisionOf(commit string) string {
	return branch + "@sha1:" + commit
}

// waitApplied waits until the Kustomization applied commit and is Ready,
// which with wait: true means every server it applied is healthy, and every
// server is Ready at its generation.
func (s *session) waitApplied(ctx context.Context, commit string, timeout time.Duration) error {
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		now := s.notApplied(ctx, revisionOf(commit))
		if ctx.Err() == nil {
			// Kept from the last look that the deadline did not cut short.
			waiting = now
		}
		return now == "", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Flux to apply %s: %s: %w", short(commit), waiting, err)
	}
	return nil
}

// notApplied says what is not yet done at revision; empty when nothing.
func (s *session) notApplied(ctx context.Context, revision string) string {
	status, err := harness.KustomizationStatus(ctx, s.client, client.ObjectKey{Namespace: fluxNamespace, Name: kustomizationName})
	if err != nil {
		return err.Error()
	}
	ready := apimeta.FindStatusCondition(status.Conditions, meta.ReadyCondition)
	if status.LastAppliedRevision != revision || ready == nil || ready.Status != metav1.ConditionTrue {
		return fmt.Sprintf("Kustomization %s/%s has applied %q, Ready: %s", fluxNamespace, kustomizationName, status.LastAppliedRevision, describe(ready))
	}
	waiting, err := notReady(ctx, s.client, s.st.Namespace)
	if err != nil {
		return err.Error()
	}
	if len(waiting) > 0 {
		return fmt.Sprintf("servers not Ready: %v", waiting)
	}
	return ""
}

// describe prints a condition for a message.
func describe(c *metav1.Condition) string {
	if c == nil {
		return "none yet"
	}
	return fmt.Sprintf("%s (%s: %s)", c.Status, c.Reason, c.Message)
}

// audit runs `embedops audit` on the dev cluster, cloning the dev
// repository into a cache in the dev directory, and returns its output.
func (s *session) audit(ctx context.Context, format string, names ...string) (string, error) {
	args := []string{"audit", "--kubeconfig", s.st.Kubeconfig, "--cache-dir", filepath.Join(s.st.Dir, "audit-cache"), "-o", format}
	if len(names) == 0 {
		args = append(args, "-A")
	} else {
		args = append(args, "-n", s.st.Namespace)
		args = append(args, names...)
	}
	var stdout, stderr bytes.Buffer
	root := cli.NewRootCommand()
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		return stdout.String(), fmt.Errorf("embedops audit: %w\n%s", err, stderr.String())
	}
	return stdout.String(), nil
}
