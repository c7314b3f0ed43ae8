//go:build unix

package populate

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an advisory lock on f without waiting, exclusive or shared
// (flock(2): any number of shared locks, or one exclusive), and reports
// whether it got it.
func tryLock(f *os.File, exclusive bool) (bool, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
