package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// nodeCgroup is the kubelet's cgroupRoot: a cgroup named after the node
// below the test process's own memory cgroup, created in every mounted
// hierarchy (the kubelet checks that its cgroupRoot exists; runc also
// joins the named and unified hierarchies). Pods' cgroups go below it, so
// removing it leaves the host's cgroups as they were.
type nodeCgroup struct {
	// Path is the cgroup path the kubelet is given.
	Path string `json:"path"`
	// Created holds, per hierarchy, the highest directory this node made.
	Created []string `json:"created"`
}

// newNodeCgroup names the node's cgroup without creating it.
func newNodeCgroup(name string) (*nodeCgroup, error) {
	parent, err := selfCgroup()
	if err != nil {
		return nil, err
	}
	return &nodeCgroup{Path: filepath.Join(parent, name)}, nil
}

// create makes the cgroup in every hierarchy, recording what it made.
func (c *nodeCgroup) create() error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, mount := range mounts {
		top, err := mkdirAllTop(mount, c.Path)
		if err != nil {
			return err
		}
		if top != "" {
			c.Created = append(c.Created, top)
		}
		if filepath.Base(mount) == "cpuset" {
			if err := inheritCpuset(mount, c.Path); err != nil {
				return err
			}
		}
	}
	return nil
}

// kill sends SIGKILL to every process in the node's cgroups until none is
// left (a process may fork while being killed).
func (c *nodeCgroup) kill() error {
	for range 50 {
		pids, err := c.pids()
		if err != nil || len(pids) == 0 {
			return err
		}
		// A process that outlives its SIGKILL is listed again next round.
		_ = killAll(pids)
	}
	return fmt.Errorf("processes are left in the cgroup %s after 50 rounds of SIGKILL", c.Path)
}

// pids lists the processes in the node's cgroups.
func (c *nodeCgroup) pids() ([]int, error) {
	var pids []int
	for _, top := range c.Created {
		err := filepath.WalkDir(top, func(path string, entry fs.DirEntry, err error) error {
			if gone(err) {
				return nil
			}
			if err != nil || !entry.IsDir() {
				return err
			}
			found, err := readPIDs(filepath.Join(path, "cgroup.procs"))
			pids = append(pids, found...)
			return err
		})
		if err != nil && !gone(err) {
			return nil, fmt.Errorf("listing the node's processes: %w", err)
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// remove deletes every cgroup the node made, deepest first.
func (c *nodeCgroup) remove() error {
	var errs []error
	for _, top := range c.Created {
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, entry fs.DirEntry, err error) error {
			if err == nil && entry.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, dir := range dirs {
			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing the cgroup %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// selfCgroup is the test process's cgroup in the memory hierarchy (or the
// unified one on a cgroup v2 host).
func selfCgroup() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading the process's cgroups: %w", err)
	}
	unified := ""
	for line := range strings.Lines(string(data)) {
		fields := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(fields) != 3 {
			continue
		}
		if slices.Contains(strings.Split(fields[1], ","), "memory") {
			return fields[2], nil
		}
		if fields[0] == "0" {
			unified = fields[2]
		}
	}
	if unified == "" {
		return "", errors.New("the process is in no memory or unified cgroup")
	}
	return unified, nil
}

// cgroupMounts lists the mount points of cgroup and cgroup2 filesystems.
func cgroupMounts() ([]string, error) {
	mounts, err := mountInfo()
	if err != nil {
		return nil, err
	}
	var points []string
	for _, m := range mounts {
		if m.fsType == "cgroup" || m.fsType == "cgroup2" {
			points = append(points, m.point)
		}
	}
	if len(points) == 0 {
		return nil, errors.New("no cgroup filesystem is mounted")
	}
	return points, nil
}

// mkdirAllTop creates mount/path and its missing parents, returning the
// highest directory it created ("" when all existed).
func mkdirAllTop(mount, path string) (string, error) {
	top := ""
	dir := mount
	for part := range strings.SplitSeq(strings.Trim(path, "/"), "/") {
		dir = filepath.Join(dir, part)
		err := os.Mkdir(dir, 0o755)
		switch {
		case err == nil && top == "":
			top = dir
		case err != nil && !errors.Is(err, fs.ErrExist):
			return top, fmt.Errorf("creating the cgroup %s: %w", dir, err)
		}
	}
	return top, nil
}

// inheritCpuset copies cpuset.cpus and cpuset.mems down to path: a cgroup
// v1 cpuset takes no process while they are empty.
func inheritCpuset(mount, path string) error {
	dir := mount
	for part := range strings.SplitSeq(strings.Trim(path, "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			current, _ := os.ReadFile(filepath.Join(dir, file))
			if strings.TrimSpace(string(current)) != "" {
				continue
			}
			value, err := os.ReadFile(filepath.Join(parent, file))
			if err != nil {
				return fmt.Errorf("reading %s: %w", file, err)
			}
			if err := os.WriteFile(filepath.Join(dir, file), value, 0o644); err != nil {
				return fmt.Errorf("writing %s of %s: %w", file, dir, err)
			}
		}
	}
	return nil
}

// readPIDs reads a cgroup.procs file; a removed cgroup, or one being
// removed (ENODEV), has none.
func readPIDs(path string) ([]int, error) {
	f, err := os.Open(path)
	if gone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var pids []int
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if pid, err := strconv.Atoi(strings.TrimSpace(scanner.Text())); err == nil {
			pids = append(pids, pid)
		}
	}
	if err := scanner.Err(); !gone(err) {
		return pids, err
	}
	return pids, nil
}

// gone reports whether err says a cgroup was removed under the reader.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}
