//go:build !unix

package populate

import (
	"errors"
	"os"
)

// tryLock reports that locking is unsupported: on this platform concurrent
// populators are not coordinated, verification alone guards the result,
// and no run prunes.
func tryLock(*os.File, bool) (bool, error) {
	return false, errors.New("advisory file locks are not supported on this platform")
}
