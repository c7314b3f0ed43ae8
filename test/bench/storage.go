package bench

import (
	"context"
	"fmt"
	"os"

	"github.com/embedops/embedops/internal/populate"
)

// StorageRow is what populating one model for one TEI image stores.
type StorageRow struct {
	// Image is the TEI image the files are selected for; "" means every file.
	Image string `json:"image"`
	// Files and StoredBytes are what the cache holds.
	Files       int   `json:"files"`
	StoredBytes int64 `json:"storedBytes"`
	// RepositoryBytes is the size of every file of the commit.
	RepositoryBytes int64 `json:"repositoryBytes"`
}

// StorageReport compares the bytes a cache stores with the repository's
// total, per TEI image.
type StorageReport struct {
	Model  string       `json:"model"`
	Images []StorageRow `json:"images"`
}

// MeasureStorage populates model at revision from the hub at endpoint into
// a fresh directory per image, and reports what each stores.
func MeasureStorage(ctx context.Context, endpoint, model, revision string, images []string) (*StorageReport, error) {
	report := &StorageReport{Model: model}
	for _, image := range images {
		dir, err := os.MkdirTemp("", "bench-storage-")
		if err != nil {
			return nil, fmt.Errorf("creating a cache directory: %w", err)
		}
		result, err := populate.Run(ctx, populate.Options{Model: model, Revision: revision, Dir: dir, Endpoint: endpoint, Image: image})
		_ = os.RemoveAll(dir)
		if err != nil {
			return nil, fmt.Errorf("populating %s for image %q: %w", model, image, err)
		}
		report.Images = append(report.Images, StorageRow{Image: image, Files: result.Files, StoredBytes: result.Bytes, RepositoryBytes: result.RepositoryBytes})
	}
	return report, nil
}

// Rows lays the report out as a table: bytes stored against the
// repository's total, per image.
func (r *StorageReport) Rows() []Row {
	rows := make([]Row, 0, len(r.Images))
	for _, row := range r.Images {
		image := row.Image
		if image == "" {
			image = "(every file)"
		}
		rows = append(rows, Row{
			Metric: "storedBytes " + image,
			Value:  byteSize(row.StoredBytes),
			Note:   fmt.Sprintf("%d files, %s of the repository's %s", row.Files, percentOf(row.StoredBytes, row.RepositoryBytes), byteSize(row.RepositoryBytes)),
		})
	}
	return rows
}

func percentOf(part, whole int64) string {
	if whole == 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}
