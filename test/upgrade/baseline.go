package upgrade

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// BaselineFile names the previous release's commit, relative to the
// repository root.
const BaselineFile = "test/upgrade/BASELINE"

// commitLine is a full commit id, the one line of BaselineFile that is
// not a comment.
var commitLine = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Baseline is the previous release: a commit of the repository's history
// and its tree.
type Baseline struct {
	// Commit is the release's full commit id.
	Commit string
	// Subject is the first line of its message, for the test's log.
	Subject string

	tree *object.Tree
}

// ReadBaselineFile returns the commit BaselineFile names under root.
func ReadBaselineFile(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, BaselineFile))
	if err != nil {
		return "", fmt.Errorf("reading the upgrade baseline: %w", err)
	}
	var commits []string
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !commitLine.MatchString(line) {
			return "", fmt.Errorf("%s: %q is not a full commit id", BaselineFile, line)
		}
		commits = append(commits, line)
	}
	if len(commits) != 1 {
		return "", fmt.Errorf("%s names %d commits, want one", BaselineFile, len(commits))
	}
	return commits[0], nil
}

// OpenBaseline finds commit in the history of the repository at root (a
// clone or a worktree). A shallow clone that lacks it is told to fetch
// its history rather than skipped: the upgrade would go untested.
func OpenBaseline(root, commit string) (*Baseline, error) {
	repo, err := git.PlainOpenWithOptions(root, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		return nil, fmt.Errorf("opening the repository at %s to read the upgrade baseline: %w", root, err)
	}
	hash := plumbing.NewHash(commit)
	c, err := repo.CommitObject(hash)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		shallow, shallowErr := repo.Storer.Shallow()
		if shallowErr == nil && len(shallow) > 0 {
			return nil, fmt.Errorf("the upgrade baseline %s (%s) is not in this shallow clone: "+
				"run `git fetch --unshallow` (CI: clone with full history, e.g. fetch-depth: 0)", commit, BaselineFile)
		}
		return nil, fmt.Errorf("the upgrade baseline %s (%s) is not in the repository's history: fetch main, or fix %s",
			commit, BaselineFile, BaselineFile)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the upgrade baseline %s: %w", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("reading the tree of the upgrade baseline %s: %w", commit, err)
	}
	subject, _, _ := strings.Cut(c.Message, "\n")
	return &Baseline{Commit: commit, Subject: subject, tree: tree}, nil
}

// Files returns the baseline's files under dir (slash-separated, relative
// to the repository root), by path.
func (b *Baseline) Files(dir string) (map[string][]byte, error) {
	sub, err := b.tree.Tree(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s: %w", dir, b.Commit, err)
	}
	files := map[string][]byte{}
	err = sub.Files().ForEach(func(f *object.File) error {
		if f.Mode == filemode.Symlink {
			return nil
		}
		data, err := fileContents(f)
		if err != nil {
			return err
		}
		files[path.Join(dir, f.Name)] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s at %s: %w", dir, b.Commit, err)
	}
	return files, nil
}

// WriteTree writes the baseline's files under dir of the repository into
// to, keeping executable bits and symbolic links.
func (b *Baseline) WriteTree(dir, to string) error {
	sub := b.tree
	if dir != "" {
		var err error
		if sub, err = b.tree.Tree(dir); err != nil {
			return fmt.Errorf("reading %s at %s: %w", dir, b.Commit, err)
		}
	}
	return sub.Files().ForEach(func(f *object.File) error {
		target := filepath.Join(to, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		data, err := fileContents(f)
		if err != nil {
			return err
		}
		switch f.Mode {
		case filemode.Symlink:
			return os.Symlink(string(data), target)
		case filemode.Executable:
			return os.WriteFile(target, data, 0o755) //nolint:gosec // an executable file of the tree
		default:
			return os.WriteFile(target, data, 0o644) //nolint:gosec // a file of the tree, not a secret
		}
	})
}

// fileContents reads a file of the tree.
func fileContents(f *object.File) ([]byte, error) {
	reader, err := f.Reader()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	defer func() { _ = reader.Close() }()
	data, err := io.ReadAll(reader)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name, err)
	}
	return data, nil
}

// ControllerPath is where the baseline's controller is cached under root:
// bin/upgrade/controller-<commit>.
func (b *Baseline) ControllerPath(root string) string {
	return filepath.Join(root, "bin", "upgrade", "controller-"+b.Commit)
}

// Controller returns the baseline's cmd/controller, built with
// CGO_ENABLED=0 from its tree (written into a temporary directory) when
// ControllerPath holds none yet. The build takes a minute or two on a warm
// module cache; later runs reuse the binary.
func (b *Baseline) Controller(root string) (string, error) {
	binary := b.ControllerPath(root)
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}
	src, err := os.MkdirTemp("", "embedops-baseline-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(src) }()
	if err := b.WriteTree("", src); err != nil {
		return "", fmt.Errorf("writing the tree of %s: %w", b.Commit, err)
	}
	if err := os.MkdirAll(filepath.Dir(binary), 0o755); err != nil {
		return "", err
	}
	// Built beside its final name and renamed, so that a concurrent run
	// never starts a half-written binary.
	partial := fmt.Sprintf("%s.partial-%d", binary, os.Getpid())
	cmd := exec.Command("go", "build", "-o", partial, "./cmd/controller")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(partial)
		return "", fmt.Errorf("building the controller of %s: %w\n%s", b.Commit, err, out)
	}
	if err := os.Rename(partial, binary); err != nil {
		return "", err
	}
	return binary, nil
}
