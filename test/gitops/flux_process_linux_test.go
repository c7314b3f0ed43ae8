package gitops

import (
	"os/exec"
	"syscall"
)

// dieWithTestBinary has the kernel kill cmd's process when the thread that
// started it exits, so a panicking test binary leaves no Flux controller
// behind. Go keeps its threads alive unless a goroutine locked to one
// exits, which nothing here does.
func dieWithTestBinary(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
