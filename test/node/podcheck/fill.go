package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// fill writes BYTES bytes to PATH, as another program's data taking room
// on a volume, and reports what the filesystem has left for the writer
// (statfs f_bavail × f_bsize, as the populator reports its room).
func fill(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: podcheck fill PATH BYTES")
	}
	size, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || size < 0 {
		return fmt.Errorf("BYTES must be a non-negative integer, not %q", args[1])
	}
	f, err := os.OpenFile(args[0], os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	// Written, not truncated to size: a sparse file takes no room.
	chunk := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(args[0], &fs); err != nil {
		return err
	}
	report(fmt.Sprintf("wrote %d bytes to %s; %d bytes free", size, args[0], int64(fs.Bavail)*fs.Bsize))
	return nil
}
