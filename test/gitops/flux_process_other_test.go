//go:build !linux

package gitops

import "os/exec"

// dieWithTestBinary does nothing where the kernel offers no parent-death
// signal: Flux controllers are then only stopped by TestMain.
func dieWithTestBinary(*exec.Cmd) {}
