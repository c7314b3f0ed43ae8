package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// downloadModel is the stand-in repository the download mode serves.
const downloadModel = "bench/download"

// DownloadOptions shape the download mode's repository.
type DownloadOptions struct {
	// Bytes is the repository's total size, split evenly over Files.
	Bytes int64
	// Files is how many weight files it has.
	Files int
}

// DownloadReport compares `embedops populate` with plain HTTP GETs of the
// same files from the stand-in hub on loopback.
type DownloadReport struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// PlainSeconds is the time to GET every file in turn and write it to
	// disk, synced as populate syncs each file: the link's speed.
	PlainSeconds float64 `json:"plainSeconds"`
	// PopulateSeconds is populate.Run's, verification included, at its
	// default of populate.DefaultParallelDownloads files at once.
	PopulateSeconds float64 `json:"populateSeconds"`
	// SerialSeconds is populate.Run's one file at a time.
	SerialSeconds float64 `json:"serialSeconds"`
	// Ratio is the populator's throughput over the plain GETs'.
	Ratio float64 `json:"ratio"`
}

// MeasureDownload serves a repository of opts' shape from hubtest on
// 127.0.0.1, GETs every file plainly, then populates it into a fresh
// directory, and reports both times.
func MeasureDownload(ctx context.Context, opts DownloadOptions) (*DownloadReport, error) {
	if opts.Files <= 0 || opts.Bytes < int64(opts.Files) {
		return nil, fmt.Errorf("a download needs at least one file of one byte: %d bytes over %d files", opts.Bytes, opts.Files)
	}
	hub := hubtest.NewHandler()
	files := downloadFiles(opts)
	commit := hub.AddCommit(downloadModel, "main", files...)
	url, stop, err := serveLoopback(hub)
	if err != nil {
		return nil, err
	}
	defer stop()
	report := &DownloadReport{Files: len(files), Bytes: totalBytes(files)}
	plain, err := timeIn(func(dir string) error { return getAll(ctx, url, commit, files, dir) })
	if err != nil {
		return nil, err
	}
	populated, err := timeIn(populateWith(ctx, url, 0))
	if err != nil {
		return nil, err
	}
	serial, err := timeIn(populateWith(ctx, url, 1))
	if err != nil {
		return nil, err
	}
	report.PlainSeconds, report.PopulateSeconds, report.SerialSeconds = plain.Seconds(), populated.Seconds(), serial.Seconds()
	report.Ratio = plain.Seconds() / populated.Seconds()
	return report, nil
}

// populateWith populates the download model from the hub at url into a
// directory, parallel files at once (0: the default).
func populateWith(ctx context.Context, url string, parallel int) func(dir string) error {
	return func(dir string) error {
		_, err := populate.Run(ctx, populate.Options{Model: downloadModel, Revision: "main", Dir: dir, Endpoint: url, Parallel: parallel})
		return err
	}
}

// downloadFiles are a config.json and opts.Files weight files of random
// bytes (nothing compresses them on the way).
func downloadFiles(opts DownloadOptions) []hubtest.File {
	r := rand.NewChaCha8([32]byte{27})
	files := []hubtest.File{{Name: "config.json", Data: []byte(`{"model_type": "bert"}`)}}
	each := opts.Bytes / int64(opts.Files)
	for i := range opts.Files {
		data := make([]byte, each)
		_, _ = r.Read(data)
		files = append(files, hubtest.File{Name: fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, opts.Files), Data: data, LFS: true})
	}
	return files
}

// totalBytes is the size of files.
func totalBytes(files []hubtest.File) int64 {
	var n int64
	for _, f := range files {
		n += int64(len(f.Data))
	}
	return n
}

// serveLoopback serves h on 127.0.0.1 until stop.
func serveLoopback(h http.Handler) (string, func(), error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listening on loopback: %w", err)
	}
	server := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = server.Serve(listener) }()
	return "http://" + listener.Addr().String(), func() { _ = server.Close() }, nil
}

// timeIn runs work in a fresh directory, removed afterwards, and returns
// how long it took.
func timeIn(work func(dir string) error) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "bench-download-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	began := time.Now()
	err = work(dir)
	return time.Since(began), err
}

// getAll GETs every file from the hub's resolve endpoint in turn and writes
// it to dir, synced.
func getAll(ctx context.Context, url, commit string, files []hubtest.File, dir string) error {
	for i, f := range files {
		if err := getFile(ctx, fmt.Sprintf("%s/%s/resolve/%s/%s", url, downloadModel, commit, f.Name), filepath.Join(dir, fmt.Sprint(i))); err != nil {
			return fmt.Errorf("GET %s: %w", f.Name, err)
		}
	}
	return nil
}

// getFile GETs url into path and syncs it.
func getFile(ctx context.Context, url, path string) (err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	if _, err := io.Copy(out, resp.Body); err != nil {
		return err
	}
	return out.Sync()
}

// Rows lays the report out as a table.
func (r *DownloadReport) Rows() []Row {
	speed := func(seconds float64) string {
		return fmt.Sprintf("%.0f MiB/s", float64(r.Bytes)/seconds/(1<<20))
	}
	return []Row{
		{Metric: "plain GET", Value: speed(r.PlainSeconds), Note: fmt.Sprintf("%d files, %s in %.2fs, one at a time, each written and synced", r.Files, byteSize(r.Bytes), r.PlainSeconds)},
		{Metric: "embedops populate", Value: speed(r.PopulateSeconds), Note: fmt.Sprintf("%.2fs, %d files at once, every file checked against the hub's sha256", r.PopulateSeconds, populate.DefaultParallelDownloads)},
		{Metric: "embedops populate, serial", Value: speed(r.SerialSeconds), Note: fmt.Sprintf("%.2fs, one file at a time", r.SerialSeconds)},
		{Metric: "populate / plain GET", Value: fmt.Sprintf("%.0f%%", 100*r.Ratio), Note: "target >= 80%"},
	}
}
