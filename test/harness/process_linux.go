package harness

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process when the thread that
// started it exits, so a panicking test binary or a killed `make dev`
// leaves no child behind. Go keeps its threads alive unless a goroutine
// locked to one exits, which nothing here does. The child also gets a
// process group of its own, so that a Ctrl-C at the terminal reaches only
// its parent, which stops the children in order.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
