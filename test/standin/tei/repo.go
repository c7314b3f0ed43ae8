package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// files gives the path of a model's file, or an error when the model
// cannot give it.
type files interface {
	get(ctx context.Context, file string) (string, error)
}

// filesOf is a local directory when --model-id names one, else the hub
// through the cache (router/src/lib.rs: `model_id_path.exists() &&
// model_id_path.is_dir()` selects a local model).
func filesOf(c config, client *hubClient, log *slog.Logger) files {
	if info, err := os.Stat(c.modelID); err == nil && info.IsDir() {
		return localFiles(c.modelID)
	}
	return &hubFiles{
		cache: newRepoCache(c.cacheDir, c.modelID, c.downloadRevision()), hub: client,
		modelID: c.modelID, revision: c.downloadRevision(), log: log,
	}
}

// localFiles is a model in a directory.
type localFiles string

func (d localFiles) get(_ context.Context, file string) (string, error) {
	path := filepath.Join(string(d), filepath.FromSlash(file))
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	return path, nil
}

// hubFiles gets files as hf-hub's ApiRepo::get does: from the cache, else
// downloaded into it. The revision is resolved once; a failure to resolve
// it is kept, so a file the cache holds is still found without the hub.
type hubFiles struct {
	cache    repoCache
	hub      *hubClient
	modelID  string
	revision string
	log      *slog.Logger

	resolved bool
	info     *revisionInfo
	infoErr  error
}

func (h *hubFiles) get(ctx context.Context, file string) (string, error) {
	if path, ok := h.cache.get(file); ok {
		return path, nil
	}
	info, err := h.resolve(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if !info.has(file) {
		return "", fmt.Errorf("%s at %s: %w: %s", h.modelID, h.revision, errNotOnHub, file)
	}
	h.log.Info("Downloading", "filename", file)
	body, blob, err := h.hub.download(ctx, h.modelID, info.SHA, file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	defer func() { _ = body.Close() }()
	return h.cache.put(info.SHA, file, blob, body)
}

// resolve asks the hub for the revision's commit and files, once.
func (h *hubFiles) resolve(ctx context.Context) (*revisionInfo, error) {
	if !h.resolved {
		h.info, h.infoErr = h.hub.info(ctx, h.modelID, h.revision)
		h.resolved = true
	}
	return h.info, h.infoErr
}
