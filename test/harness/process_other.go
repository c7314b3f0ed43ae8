//go:build !linux

package harness

import "os/exec"

// dieWithParent does nothing where the kernel offers no parent-death
// signal: children are then only stopped by whoever started them.
func dieWithParent(*exec.Cmd) {}
