package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Ownership is what `podcheck owners` reports: the directory's owner and
// mode, and the entries below it counted by "uid:gid", as the pod sees
// them (links not followed).
type Ownership struct {
	// UID and GID own the directory.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Mode is the directory's permission bits with setuid, setgid and
	// sticky, in octal ("2770").
	Mode string `json:"mode"`
	// Below counts the entries under the directory by "uid:gid".
	Below map[string]int `json:"below"`
}

// owners reports the ownership of a directory tree.
func owners(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: podcheck owners DIR")
	}
	root, err := statOf(args[0])
	if err != nil {
		return err
	}
	out := Ownership{UID: root.Uid, GID: root.Gid, Mode: fmt.Sprintf("%04o", root.Mode&0o7777), Below: map[string]int{}}
	err = filepath.WalkDir(args[0], func(path string, _ fs.DirEntry, err error) error {
		if err != nil || path == args[0] {
			return err
		}
		st, err := statOf(path)
		if err != nil {
			return err
		}
		out.Below[fmt.Sprintf("%d:%d", st.Uid, st.Gid)]++
		return nil
	})
	if err != nil {
		return err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	report(string(data))
	return nil
}

// statOf is path's lstat.
func statOf(path string) (*syscall.Stat_t, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return info.Sys().(*syscall.Stat_t), nil
}
