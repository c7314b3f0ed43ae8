package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

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
	// gitops is the tool of st, for what change asks of it.
	gitops gitopsTool
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
	tool, err := newGitopsTool(st.GitOps)
	if err != nil {
		return nil, err
	}
	return &session{out: out, client: c, st: st, gitops: tool}, nil
}

// waitApplied waits until the GitOps tool applied commit and found it
// healthy, and every server is Ready at its generation.
func (s *session) waitApplied(ctx context.Context, commit string, timeout time.Duration) error {
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		now := s.notApplied(ctx, commit)
		if ctx.Err() == nil {
			// Kept from the last look that the deadline did not cut short.
			waiting = now
		}
		return now == "", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to apply %s: %s: %w", s.gitops.name(), short(commit), waiting, err)
	}
	return nil
}

// notApplied says what is not yet done at commit; empty when nothing.
func (s *session) notApplied(ctx context.Context, commit string) string {
	if waiting := s.gitops.notApplied(ctx, s.client, commit); waiting != "" {
		return waiting
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
