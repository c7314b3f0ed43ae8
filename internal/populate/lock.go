package populate

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// lockPoll is how often a populator checks whether another one released a lock.
const lockPoll = time.Second

// folderLockName is the lock file, beside the blobs' under
// .locks/models--org--name, that runs hold on the whole model folder. Blob
// names are hex digits, so it names no blob's lock.
const folderLockName = "folder.lock"

// folderLockPath is the lock file of the model's folder.
func (c cacheRepo) folderLockPath() string {
	return filepath.Join(c.dir, ".locks", c.folder, folderLockName)
}

// enterFolder waits, once per run and before the run first writes in the
// model's folder, until the run may work there, and records whether it
// holds the folder alone (populator.alone); leaveFolder lets the others
// in. A run that prunes takes the folder's lock exclusively, so it deletes
// nothing another populator fetches, links or checks; the others share
// it, so they wait only for a pruning run. Where locking is unsupported
// every run goes on and none holds the folder alone, so none prunes
// (pruneAllBut).
func (p *populator) enterFolder(ctx context.Context) error {
	if p.leave != nil {
		return nil
	}
	release, alone, err := p.waitForLock(ctx, p.cache.folderLockPath(), p.prune, "model folder")
	if err != nil {
		return err
	}
	p.leave, p.alone = release, alone
	return nil
}

// leaveFolder releases the model folder's lock if the run took it.
func (p *populator) leaveFolder() {
	if p.leave != nil {
		p.leave()
	}
}

// folderExists reports whether the model's folder is in the cache.
func (c cacheRepo) folderExists() bool {
	_, err := os.Stat(c.root())
	return err == nil
}

// lockBlob waits until no other populator writes the blob, and returns the
// function that lets the others go.
func (p *populator) lockBlob(ctx context.Context, blob, name string) (func(), error) {
	release, _, err := p.waitForLock(ctx, p.cache.lockPath(blob), true, name)
	return release, err
}

// waitForLock waits until it holds the advisory lock in path, exclusive or
// shared, and returns the function that releases it (closing the lock file
// does) and whether it holds it. Where locks are unsupported it logs a
// warning and goes on without. It follows the lock files huggingface_hub
// takes around a download (file_download.py, WeakFileLock), polling
// instead of blocking so that a cancelled context ends the wait.
func (p *populator) waitForLock(ctx context.Context, path string, exclusive bool, what string) (func(), bool, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, false, diskError("creating", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, diskError("creating", path, err)
	}
	release := func() { _ = f.Close() }
	for waited := false; ; waited = true {
		locked, err := tryLock(f, exclusive)
		if err != nil {
			p.log.Warn("cannot lock; other populators are not kept out", "for", what, "lock", path, "error", err.Error())
			return release, false, nil
		}
		if locked {
			return release, true, nil
		}
		if !waited {
			p.log.Info("waiting for another populator", "for", what, "lock", path, "exclusive", exclusive)
		}
		if err := p.sleep(ctx, lockPoll); err != nil {
			release()
			return nil, false, err
		}
	}
}
