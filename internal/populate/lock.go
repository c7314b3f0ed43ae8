package populate

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// lockPoll is how often a populator checks whether another one released a blob.
const lockPoll = time.Second

// lockBlob waits until no other populator writes the blob, and returns the
// function that lets the others go. Closing the lock file releases the lock.
func (p *populator) lockBlob(ctx context.Context, blob, name string) (func(), error) {
	path := p.cache.lockPath(blob)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, diskError("creating", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, diskError("creating", path, err)
	}
	release := func() { _ = f.Close() }
	for waited := false; ; waited = true {
		locked, err := tryLock(f)
		if err != nil {
			p.log.Warn("cannot lock the blob; another populator may write it too", "file", name, "lock", path, "error", err.Error())
			return release, nil
		}
		if locked {
			return release, nil
		}
		if !waited {
			p.log.Info("waiting for another populator", "file", name, "lock", path)
		}
		if err := p.sleep(ctx, lockPoll); err != nil {
			release()
			return nil, err
		}
	}
}
