package bench

import (
	"os"
	"testing"

	"github.com/embedops/embedops/internal/populate/hubtest"
)

// storageImages are TEI 1.9's CPU and CUDA images, and no image (every
// file, as populate did before it read TEI's rules).
var storageImages = []string{
	"ghcr.io/huggingface/text-embeddings-inference:cpu-1.9",
	"ghcr.io/huggingface/text-embeddings-inference:1.9",
	"",
}

// BenchmarkPopulateStorage populates a stand-in hub repository shaped like
// sentence-transformers/all-MiniLM-L6-v2 (safetensors, pytorch_model.bin,
// ONNX, OpenVINO, TensorFlow and Rust copies of 1 MiB weights) for each
// image, and reports the bytes stored against the repository's total.
func BenchmarkPopulateStorage(b *testing.B) {
	hub := hubtest.New(b)
	hub.AddCommit("sentence-transformers/all-MiniLM-L6-v2", "main", hubtest.MultiFormatRepository(1<<20)...)
	var report *StorageReport
	for b.Loop() {
		var err error
		report, err = MeasureStorage(b.Context(), hub.URL, "sentence-transformers/all-MiniLM-L6-v2", "main", storageImages)
		must(b, err)
	}
	for _, row := range report.Images {
		if row.Image == storageImages[0] {
			b.ReportMetric(float64(row.StoredBytes)/float64(row.RepositoryBytes), "cpuStoredFraction")
		}
		if row.Image == storageImages[1] {
			b.ReportMetric(float64(row.StoredBytes)/float64(row.RepositoryBytes), "cudaStoredFraction")
		}
	}
	must(b, Print(os.Stderr, report, "table"))
}

func TestStorageReportStoresLessThanTheRepository(t *testing.T) {
	hub := hubtest.New(t)
	hub.AddCommit("org/m", "main", hubtest.MultiFormatRepository(64<<10)...)

	report, err := MeasureStorage(t.Context(), hub.URL, "org/m", "main", storageImages)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range report.Images {
		switch {
		case row.Image == "" && row.StoredBytes != row.RepositoryBytes:
			t.Errorf("every file: stored %d of %d bytes", row.StoredBytes, row.RepositoryBytes)
		case row.Image != "" && 3*row.StoredBytes > row.RepositoryBytes:
			t.Errorf("%s stores %d of %d bytes: more than a third of a repository with ten copies of the weights", row.Image, row.StoredBytes, row.RepositoryBytes)
		}
	}
	if len(report.Rows()) != len(storageImages) {
		t.Errorf("%d rows, want one per image", len(report.Rows()))
	}
}
