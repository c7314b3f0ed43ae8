package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestClaimStateRefusesWhileUpRuns(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "state.json")
	g.Expect(saveState(path, &state{PID: os.Getpid()})).To(Succeed())
	err := claimState(path, &state{PID: os.Getpid() + 1})
	g.Expect(err).To(MatchError(ContainSubstring("already running")))
}

func TestClaimStateReplacesAKilledUp(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "state.json")
	stale, err := os.MkdirTemp("", dirPrefix+"*")
	g.Expect(err).NotTo(HaveOccurred())
	// Pid 0 is never a process of its own.
	g.Expect(saveState(path, &state{PID: 0, Dir: stale})).To(Succeed())
	g.Expect(claimState(path, &state{PID: os.Getpid()})).To(Succeed())
	g.Expect(stale).NotTo(BeADirectory())
	st, err := readState(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.PID).To(Equal(os.Getpid()))
}
