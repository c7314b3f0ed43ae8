package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// state is what up records in the state file for change and down: where
// the cluster and the repository are.
type state struct {
	// PID is up's process.
	PID int `json:"pid"`
	// Dir holds every file up writes: logs, repositories, artifacts.
	Dir string `json:"dir"`
	// Kubeconfig reaches the local cluster.
	Kubeconfig string `json:"kubeconfig"`
	// RepoURL is the dev repository on the git server.
	RepoURL string `json:"repoURL"`
	// Namespace holds the examples.
	Namespace string `json:"namespace"`
	// GitOps is the tool applying them (-gitops); empty means Flux.
	GitOps string `json:"gitops,omitempty"`
	// Real says the pods run on a real node, not kwok.
	Real bool `json:"real,omitempty"`
}

// readState reads the state file of a running up.
func readState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no make dev is running (%s does not exist): run make dev first", path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the dev state: %w", err)
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s is not a dev state file: %w", path, err)
	}
	return st, nil
}

// claimState records st, refusing while another up is running; a state
// left by an up that was killed is replaced, and its directory removed.
func claimState(path string, st *state) error {
	if old, err := readState(path); err == nil {
		if running(old.PID) {
			return fmt.Errorf("make dev is already running (pid %d): run make dev-down first", old.PID)
		}
		removeStale(old)
	}
	return saveState(path, st)
}

// saveState writes st to path.
func saveState(path string, st *state) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("writing the dev state: %w", err)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the dev state: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the dev state: %w", err)
	}
	return nil
}

// removeStale removes what a killed up left in its directory; only a
// directory up itself created (under the temporary directory, named as up
// names it) is removed.
func removeStale(old *state) {
	if strings.HasPrefix(old.Dir, filepath.Join(os.TempDir(), dirPrefix)) {
		_ = os.RemoveAll(old.Dir)
	}
}

// running reports whether pid is a live process; exited ones, zombies
// included, have an empty cmdline.
func running(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && len(cmdline) > 0
}

// removeStateFile removes the state file of an up that is gone.
func removeStateFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the dev state: %w", err)
	}
	return nil
}
