package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// envtest (controller-runtime v0.25.2 pkg/internal/testing/process) starts
// etcd and kube-apiserver in process groups of their own, with no
// parent-death signal, and stops them only from Environment.Stop: a test
// binary that panics, or that go test's -timeout kills, leaves both running
// with their data directories. The harness starts them through a wrapper
// that execs them under util-linux's setpriv --pdeathsig KILL, so the
// kernel kills them when the thread that started them exits, as
// dieWithParent does for the harness's own children. setpriv sets the
// signal on itself and keeps it across the exec of the binary, which is not
// setuid (prctl(2), PR_SET_PDEATHSIG). Where setpriv is missing the binary
// runs as it is.

// setprivPath is util-linux's setpriv, empty when it is not installed.
func setprivPath() string {
	path, err := exec.LookPath("setpriv")
	if err != nil {
		return ""
	}
	return path
}

// dieWithTestBinary returns an executable that runs binary and dies with
// the thread that starts it: a shell script in bin/diewithparent/, named
// after binary and a digest of its path, written once (renamed into place,
// so concurrent test packages never run a half-written one). It returns
// binary itself where setpriv is missing.
func dieWithTestBinary(root, binary string) (string, error) {
	setpriv := setprivPath()
	if setpriv == "" {
		return binary, nil
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %q --pdeathsig KILL -- %q \"$@\"\n", setpriv, binary)
	digest := sha256.Sum256([]byte(script))
	dir := filepath.Join(root, "bin", "diewithparent")
	wrapper := filepath.Join(dir, filepath.Base(binary)+"-"+hex.EncodeToString(digest[:6]))
	if _, err := os.Stat(wrapper); err == nil {
		return wrapper, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	partial := fmt.Sprintf("%s.partial-%d", wrapper, os.Getpid())
	if err := os.WriteFile(partial, []byte(script), 0o755); err != nil { //nolint:gosec // an executable wrapper, no secret
		return "", err
	}
	return wrapper, os.Rename(partial, wrapper)
}
