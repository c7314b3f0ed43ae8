//go:build unix

package populate

import "golang.org/x/sys/unix"

// freeBytes is the space dir's filesystem gives an unprivileged writer,
// as df reports it available: statfs(2) f_bavail blocks of f_bsize bytes.
// ok is false when statfs fails.
func freeBytes(dir string) (int64, bool) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return 0, false
	}
	return int64(fs.Bavail) * int64(fs.Bsize), true //nolint:gosec,unconvert // block counts fit int64 on any real volume; field types differ by platform.
}
