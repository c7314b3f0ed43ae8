package audit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// uploadPackMissing is why a test that clones over file:// cannot run.
const uploadPackMissing = "go-git's file transport runs git-upload-pack, which is not installed (Debian: the git package)"

// requireUploadPack skips a test that clones over file:// when
// git-upload-pack is missing, and fails it when CI is set (as make's
// `ifdef CI`): under CI every test runs, and make tools checks for it.
func requireUploadPack(t *testing.T) {
	t.Helper()
	if uploadPackInstalled() {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(uploadPackMissing + "; CI runs every test")
	}
	t.Skip(uploadPackMissing)
}

// uploadPackInstalled looks for git-upload-pack where go-git's file
// transport does: on PATH, then in `git --exec-path`
// (plumbing/transport/file/client.go).
func uploadPackInstalled() bool {
	if _, err := exec.LookPath("git-upload-pack"); err == nil {
		return true
	}
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return false
	}
	info, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "git-upload-pack"))
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}
