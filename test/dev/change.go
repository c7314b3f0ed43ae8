package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
	"github.com/embedops/embedops/test/harness"
)

// changedServer is the example whose cache `dev change` moves; its
// retainFor is short, so its old binding is Released within a minute.
const changedServer = "minimal"

// changeResult is what a change did.
type changeResult struct {
	// commit is the pushed commit.
	commit string
	// oldBinding and newBinding are the server's bindings before and after.
	oldBinding, newBinding string
}

// change commits a new storage class for the changed server's cache to the
// dev repository of the running up, then shows the server's new binding,
// the old one retiring and the audit of both.
func change(ctx context.Context, out io.Writer, opts options) error {
	st, err := readState(opts.stateFile)
	if err != nil {
		return err
	}
	if !running(st.PID) {
		return fmt.Errorf("the make dev that wrote %s (pid %d) is not running: run make dev", opts.stateFile, st.PID)
	}
	if st.Kubeconfig == "" || st.RepoURL == "" {
		return errors.New("make dev is still starting: run make dev-change once it shows the audit")
	}
	s, err := newSession(out, st)
	if err != nil {
		return err
	}
	_, err = s.change(ctx, opts.timeout)
	return err
}

// change makes the change and follows it to the end.
func (s *session) change(ctx context.Context, timeout time.Duration) (*changeResult, error) {
	server := &embedopsv1.EmbeddingServer{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.st.Namespace, Name: changedServer}, server); err != nil {
		return nil, fmt.Errorf("reading the %s server: %w", changedServer, err)
	}
	result := &changeResult{oldBinding: server.Status.CacheBinding}
	if result.oldBinding == "" {
		return nil, fmt.Errorf("the %s server has no binding yet: wait until make dev shows it Ready", changedServer)
	}
	var err error
	if result.commit, err = s.pushChange(ctx); err != nil {
		return nil, err
	}
	if result.newBinding, err = s.followNewBinding(ctx, result, timeout); err != nil {
		return nil, err
	}
	if err := s.followRetirement(ctx, result.oldBinding, timeout); err != nil {
		return nil, err
	}
	fmt.Fprintln(s.out)
	if err := printBindings(ctx, s.out, s.client, s.st.Namespace, result.oldBinding, result.newBinding); err != nil {
		return nil, err
	}
	fmt.Fprintf(s.out, "\n$ embedops audit -n %s %s %s\n", s.st.Namespace, result.oldBinding, result.newBinding)
	audited, err := s.audit(ctx, "table", result.oldBinding, result.newBinding)
	fmt.Fprint(s.out, audited)
	return result, err
}

// pushChange pushes the change to the dev repository and asks the GitOps
// tool to fetch it now.
func (s *session) pushChange(ctx context.Context) (string, error) {
	commit, err := commitChange(ctx, s.out, s.st.RepoURL)
	if err != nil {
		return "", err
	}
	return commit, s.gitops.refresh(ctx, s.client)
}

// commitChange clones the dev repository at url, moves the changed server's
// cache to the other storage class and pushes the commit.
func commitChange(ctx context.Context, out io.Writer, url string) (string, error) {
	repo, err := harness.CloneGitRepo(ctx, url, branch)
	if err != nil {
		return "", err
	}
	file := path.Join(examplesPath, changedServer+".yaml")
	content, err := repo.ReadFile(file)
	if err != nil {
		return "", err
	}
	edited, from, to, err := moveStorageClass(string(content))
	if err != nil {
		return "", fmt.Errorf("editing %s: %w", file, err)
	}
	subject := fmt.Sprintf("Move the %s cache to the %s storage class", changedServer, to)
	commit, err := repo.Commit(ctx, subject, map[string]string{file: edited})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(out, "dev: pushed %s %q by %s: %s storageClassName %s -> %s\n", short(commit), subject, author(), file, from, to)
	return commit, nil
}

// followNewBinding waits until the GitOps tool applied the commit and the server is
// Ready on a new binding, prints it and returns its name.
func (s *session) followNewBinding(ctx context.Context, result *changeResult, timeout time.Duration) (string, error) {
	began := time.Now()
	if err := s.waitApplied(ctx, result.commit, timeout); err != nil {
		return "", err
	}
	server := &embedopsv1.EmbeddingServer{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.st.Namespace, Name: changedServer}, server); err != nil {
		return "", err
	}
	if server.Status.CacheBinding == result.oldBinding {
		return "", errors.New("the server kept its binding although its cache decision changed")
	}
	fmt.Fprintf(s.out, "dev: %s applied %s; %s is Ready on a new binding (%s)\n\n", s.gitops.name(), short(result.commit), changedServer, since(began))
	if err := printBindings(ctx, s.out, s.client, s.st.Namespace, result.oldBinding, server.Status.CacheBinding); err != nil {
		return "", err
	}
	fmt.Fprintln(s.out)
	return server.Status.CacheBinding, nil
}

// moveStorageClass moves the cache of a manifest to the other of the dev
// cluster's StorageClasses: it replaces the storageClassName under cache,
// or adds one to the cache block. It returns the edited manifest and the
// classes moved from and to.
func moveStorageClass(manifest string) (edited, from, to string, err error) {
	lines := strings.Split(manifest, "\n")
	cache := -1
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		switch {
		case trimmed == "cache:":
			cache = i
		case cache >= 0 && strings.HasPrefix(trimmed, "storageClassName:"):
			from = strings.TrimSpace(strings.TrimPrefix(trimmed, "storageClassName:"))
			to = otherClass(from)
			lines[i] = indent + "storageClassName: " + to
			return strings.Join(lines, "\n"), from, to, nil
		}
	}
	if cache < 0 {
		return "", "", "", errors.New("no cache block to edit")
	}
	indent := lines[cache][:len(lines[cache])-len(strings.TrimLeft(lines[cache], " "))] + "  "
	from, to = harness.DefaultStorageClass, fastStorageClass
	lines = append(lines[:cache+1], append([]string{indent + "storageClassName: " + to}, lines[cache+1:]...)...)
	return strings.Join(lines, "\n"), from, to, nil
}

// otherClass is the dev cluster's StorageClass that is not class.
func otherClass(class string) string {
	if class == fastStorageClass {
		return harness.DefaultStorageClass
	}
	return fastStorageClass
}
