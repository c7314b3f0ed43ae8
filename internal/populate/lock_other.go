//go:build !unix

package populate

import (
	"errors"
	"os"
)

// tryLock reports that locking is unsupported: on this platform concurrent
// populators are not coordinated, and verification alone guards the result.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("advisory file locks are not supported on this platform")
}
