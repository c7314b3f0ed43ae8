package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("o", "bin/krew", "directory for the archives and embedops.yaml")
	repo := flag.String("repo", ".", "the embedops repository root")
	version := flag.String("version", "v0.0.0", "the plugin version krew shows (a semantic version, v-prefixed)")
	commit := flag.String("commit", "", "the commit stamped into `embedops version`")
	uriBase := flag.String("uri-base", "", "where the archives will be published; empty: their file:// paths")
	flag.Parse()
	if err := run(context.Background(), *repo, *out, *version, *commit, *uriBase, platforms); err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

// run builds each of targets' archives into out and writes embedops.yaml.
func run(ctx context.Context, repo, out, version, commit, uriBase string, targets [][2]string) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-X github.com/embedops/embedops/internal/cli.version=%s -X github.com/embedops/embedops/internal/cli.commit=%s", version, commit)
	var archives []archive
	for _, p := range targets {
		a, err := buildArchive(ctx, repo, out, p[0], p[1], ldflags)
		if err != nil {
			return err
		}
		archives = append(archives, a.withURI(uriBase))
	}
	data, err := manifestOf(version, archives).marshal()
	if err != nil {
		return err
	}
	manifest := filepath.Join(out, pluginName+".yaml")
	if err := os.WriteFile(manifest, data, 0o644); err != nil {
		return err
	}
	fmt.Printf("krew: wrote %s and %d archives\n", manifest, len(archives))
	return nil
}
