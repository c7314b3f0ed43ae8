package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/embedops/embedops/test/harness"
)

// seedSubject is the message of the commit that adds the examples.
const seedSubject = "Add the embedops examples"

// seed commits every file of dir (not its subdirectories) to examplesPath
// of repo, after edit (when given) changed them, and returns the commit.
func seed(ctx context.Context, repo *harness.GitRepo, dir string, edit func(files map[string]string) error) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("reading the examples: %w", err)
	}
	files := map[string]string{}
	for _, entry := range entries {
		if !entry.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, entry.Name()))
		if err != nil {
			return "", fmt.Errorf("reading the examples: %w", err)
		}
		files[path.Join(examplesPath, entry.Name())] = string(data)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no examples in %s", dir)
	}
	if edit != nil {
		if err := edit(files); err != nil {
			return "", err
		}
	}
	return repo.Commit(ctx, seedSubject, files)
}

// author is how git prints the commits' author.
func author() string {
	return harness.GitAuthor.Name + " <" + harness.GitAuthor.Email + ">"
}

// short abbreviates a commit as git does.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
