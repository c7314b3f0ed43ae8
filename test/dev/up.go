package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// logTailLines is how much of a log a failed run prints.
const logTailLines = 40

// up starts everything, waits until the GitOps tool applied the examples
// and every server is Ready, shows the story, and holds until ctx ends.
func up(ctx context.Context, out io.Writer, opts options) (err error) {
	began := time.Now()
	e, err := startEnv(ctx, out, opts)
	if err != nil && ctx.Err() != nil {
		// Interrupted while starting: what started is stopped, and the
		// logs of a half-started cluster would only hide that.
		return errors.New("interrupted while starting; stopped everything it had started")
	}
	if err != nil {
		return err
	}
	if e.node != nil {
		takeSignals()
	}
	defer func() {
		fmt.Fprintln(out, "dev: stopping every process and removing", e.st.Dir)
		err = errors.Join(err, e.stop())
	}()
	s, err := newSession(out, &e.st)
	if err != nil {
		return err
	}
	if err := e.show(ctx, s); err != nil {
		if ctx.Err() == nil {
			e.printLogTails()
		}
		return err
	}
	fmt.Fprintf(out, "\ndev: the whole story took %s. Try:\n", since(began))
	fmt.Fprintf(out, "  KUBECONFIG=%s kubectl get embedops -A\n", e.st.Kubeconfig)
	fmt.Fprintf(out, "  make dev-change   # commit a new storage class for minimal's cache and follow its bindings\n")
	fmt.Fprintf(out, "  make dev-down     # or Ctrl-C: stop everything\n")
	if opts.hold {
		<-ctx.Done()
	}
	return nil
}

// show waits for the seeded commit to be applied and every server Ready,
// then prints servers, bindings and the audit.
func (e *env) show(ctx context.Context, s *session) error {
	began := time.Now()
	fmt.Fprintf(e.out, "dev: waiting for %s to apply %s and for every server to be Ready\n", e.gitops.name(), short(e.seed))
	if err := s.waitApplied(ctx, e.seed, e.opts.timeout); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "dev: applied and Ready (%s)\n\n", since(began))
	if err := printServers(ctx, e.out, s.client, s.st.Namespace); err != nil {
		return err
	}
	fmt.Fprintln(e.out)
	if err := printBindings(ctx, e.out, s.client, s.st.Namespace); err != nil {
		return err
	}
	fmt.Fprintln(e.out, "\n$ embedops audit -A")
	audited, err := s.audit(ctx, "table")
	fmt.Fprint(e.out, audited)
	if err != nil || e.node == nil {
		return err
	}
	return e.showEmbedding(ctx)
}

// applyStep makes the GitOps tool apply the dev repository's examples.
func (e *env) applyStep() startStep {
	return startStep{"created " + e.gitops.objects(), func(ctx context.Context) error {
		return e.gitops.apply(ctx, e.client, e.repo.URL, e.opts.namespace)
	}}
}

// printLogTails prints the end of the GitOps tool's and the controller's
// logs on stderr, for a run that failed: stopping removes them.
func (e *env) printLogTails() {
	fmt.Fprintln(os.Stderr, e.gitops.logTails())
	if e.controller != nil {
		lines := strings.Split(strings.TrimRight(e.controller.Logs(), "\n"), "\n")
		fmt.Fprintf(os.Stderr, "--- last lines of the controller log:\n%s\n", strings.Join(lines[max(0, len(lines)-logTailLines):], "\n"))
	}
}
