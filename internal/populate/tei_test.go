package populate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/embedops/embedops/internal/populate"
	"github.com/embedops/embedops/internal/populate/hubtest"
)

// Images of TEI 1.9 by the backends they run.
const (
	cpuImage    = "ghcr.io/huggingface/text-embeddings-inference:cpu-1.9"
	cudaImage   = "ghcr.io/huggingface/text-embeddings-inference:1.9"
	hpuImage    = "ghcr.io/huggingface/text-embeddings-inference:hpu-1.9"
	customImage = "registry.example/tei-custom:v1"
)

// hfHubGet ports hf-hub 0.4's CacheRepo::get (src/lib.rs), the lookup TEI
// makes before any download: read refs/<revision> as it is (no trimming),
// then snapshots/<that>/<file> must exist, links followed. The folder is
// Repo::folder_name of testModel: "models--" and the id with "/" replaced
// by "--".
func hfHubGet(dir, revision, file string) (string, bool) {
	folder := filepath.Join(dir, strings.ReplaceAll("models--"+testModel, "/", "--"))
	commit, err := os.ReadFile(filepath.Join(folder, "refs", revision))
	if err != nil {
		return "", false
	}
	path := filepath.Join(folder, "snapshots", string(commit), file)
	if _, err := os.Stat(path); err != nil {
		return "", false
	}
	return path, true
}

// names are the names of files.
func names(files []hubtest.File) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		out = append(out, f.Name)
	}
	return out
}

// without returns files but those named.
func without(files []hubtest.File, drop ...string) []hubtest.File {
	return slices.DeleteFunc(slices.Clone(files), func(f hubtest.File) bool {
		return slices.Contains(drop, f.Name) || slices.ContainsFunc(drop, func(d string) bool {
			return strings.HasSuffix(d, "/") && strings.HasPrefix(f.Name, d)
		})
	})
}

// routerFiles are what TEI's router reads of MultiFormatRepository.
var routerFiles = []string{"1_Pooling/config.json", "sentence_bert_config.json", "config_sentence_transformers.json", "config.json", "tokenizer.json"}

// denseFiles are a Sentence Transformers model with one Dense module.
func denseFiles(files []hubtest.File) []hubtest.File {
	modules := `[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},` +
		`{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},` +
		`{"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"}]`
	files = without(files, "modules.json")
	return append(files,
		hubtest.File{Name: "modules.json", Data: []byte(modules)},
		hubtest.File{Name: "2_Dense/config.json", Data: []byte(`{"in_features": 384, "out_features": 768}`)},
		hubtest.File{Name: "2_Dense/model.safetensors", Data: []byte("dense weights"), LFS: true},
		hubtest.File{Name: "2_Dense/pytorch_model.bin", Data: []byte("dense weights, pickled"), LFS: true},
		hubtest.File{Name: "2_Dense_1024/config.json", Data: []byte(`{"out_features": 1024}`)},
		hubtest.File{Name: "2_Dense_1024/model.safetensors", Data: []byte("other dense weights"), LFS: true},
	)
}

// shardedFiles replace model.safetensors by an index and two shards.
func shardedFiles(files []hubtest.File) []hubtest.File {
	files = without(files, "model.safetensors")
	return append(files,
		hubtest.File{Name: "model.safetensors.index.json", Data: []byte(`{"metadata": {}, "weight_map": {` +
			`"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}}`)},
		hubtest.File{Name: "model-00001-of-00002.safetensors", Data: []byte("shard 1"), LFS: true},
		hubtest.File{Name: "model-00002-of-00002.safetensors", Data: []byte("shard 2"), LFS: true},
	)
}

func TestRunCachesWhatTEIReadsForTheImage(t *testing.T) {
	repo := hubtest.MultiFormatRepository(4096)
	onnx := []string{"onnx/model.onnx", "tokenizer_config.json"}
	cases := []struct {
		name  string
		image string
		files []hubtest.File
		want  []string
	}{
		{"CPU image reads ONNX first", cpuImage, repo, append(slices.Clone(routerFiles), onnx...)},
		{"CPU image without ONNX falls back to safetensors", cpuImage, without(repo, "onnx/"),
			append(slices.Clone(routerFiles), "tokenizer_config.json", "model.safetensors", "modules.json")},
		{"CUDA image reads safetensors and modules.json", cudaImage, repo, append(slices.Clone(routerFiles), "model.safetensors", "modules.json")},
		{"CUDA image reads the Dense module modules.json names", cudaImage, denseFiles(repo),
			append(slices.Clone(routerFiles), "model.safetensors", "modules.json", "2_Dense/config.json", "2_Dense/model.safetensors")},
		{"sharded safetensors", cudaImage, shardedFiles(repo), append(slices.Clone(routerFiles),
			"model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "modules.json")},
		{"pytorch_model.bin only without safetensors", cudaImage, without(repo, "model.safetensors"), append(slices.Clone(routerFiles), "pytorch_model.bin", "modules.json")},
		{"python backend reads no Dense module", hpuImage, denseFiles(repo), append(slices.Clone(routerFiles), "model.safetensors")},
		{"unknown image caches what any backend reads", customImage, repo, append(slices.Clone(routerFiles), append(onnx, "model.safetensors", "modules.json")...)},
		{"no image caches every file", "", repo, names(repo)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			commit := hub.AddCommit(testModel, "main", tc.files...)
			dir := t.TempDir()
			opts := options(t, hub, dir, &sleeper{})
			opts.Image = tc.image

			result, err := populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(result.Names).To(ConsistOf(tc.want))
			var size, total int64
			for _, f := range tc.files {
				total += int64(len(f.Data))
				if slices.Contains(tc.want, f.Name) {
					size += int64(len(f.Data))
				}
			}
			g.Expect(result.Bytes).To(Equal(size))
			g.Expect(result.RepositoryBytes).To(Equal(total))
			for _, f := range tc.files {
				_, cached := hfHubGet(dir, commit, f.Name)
				g.Expect(cached).To(Equal(slices.Contains(tc.want, f.Name)), f.Name)
			}
			again, err := populate.Run(context.Background(), opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(result), "a second run verifies the same snapshot")
		})
	}
}

func TestTEIFindsThePopulatedFilesByBranchAndByCommit(t *testing.T) {
	g := NewWithT(t)
	hub := hubtest.New(t)
	repo := hubtest.MultiFormatRepository(1024)
	commit := hub.AddCommit(testModel, "main", repo...)
	dir := t.TempDir()
	opts := options(t, hub, dir, &sleeper{})
	opts.Image = cudaImage

	result, err := populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())

	for _, revision := range []string{"main", commit} {
		for _, name := range result.Names {
			path, ok := hfHubGet(dir, revision, name)
			g.Expect(ok).To(BeTrue(), "TEI started on --revision=%s finds %s", revision, name)
			g.Expect(os.ReadFile(path)).To(Equal(fileNamed(repo, name).Data))
		}
		_, ok := hfHubGet(dir, revision, "pytorch_model.bin")
		g.Expect(ok).To(BeFalse(), "a file TEI does not read is not cached")
	}

	// The branch moves on: TEI on the commit still finds the first snapshot.
	next := hub.AddCommit(testModel, "main", repo[:len(repo)-1]...)
	_, err = populate.Run(context.Background(), opts)
	g.Expect(err).NotTo(HaveOccurred())
	path, ok := hfHubGet(dir, commit, "config.json")
	g.Expect(ok).To(BeTrue())
	g.Expect(path).To(ContainSubstring(commit))
	path, ok = hfHubGet(dir, "main", "config.json")
	g.Expect(ok).To(BeTrue())
	g.Expect(path).To(ContainSubstring(next))
}

func TestRunRefusesAModelTEICannotLoad(t *testing.T) {
	repo := hubtest.MultiFormatRepository(256)
	noWeights := without(repo, "model.safetensors", "pytorch_model.bin", "onnx/")
	cases := []struct {
		name    string
		image   string
		files   []hubtest.File
		message string
	}{
		{"no weights for the CPU image", cpuImage, noWeights, "no ONNX, safetensors or pytorch_model.bin weights"},
		{"ONNX only for a CUDA image", cudaImage, without(repo, "model.safetensors", "pytorch_model.bin"), "no ONNX, safetensors or pytorch_model.bin weights"},
		{"no tokenizer.json", cudaImage, without(repo, "tokenizer.json"), "no tokenizer.json"},
		{"index naming a missing shard", cudaImage, without(shardedFiles(repo), "model-00002-of-00002.safetensors"), `shard "model-00002-of-00002.safetensors"`},
		{"Dense module without weights", cudaImage, without(denseFiles(repo), "2_Dense/model.safetensors", "2_Dense/pytorch_model.bin"), "Dense module 2_Dense has neither"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			hub.AddCommit(testModel, "main", tc.files...)
			parent := t.TempDir()
			dir := filepath.Join(parent, "cache")
			opts := options(t, hub, dir, &sleeper{})
			opts.Image = tc.image

			_, err := populate.Run(context.Background(), opts)

			g.Expect(err).To(MatchError(populate.ErrNoWeights))
			g.Expect(err).To(MatchError(ContainSubstring(tc.message)))
			entries, _ := os.ReadDir(parent)
			g.Expect(len(entries)).To(BeNumerically("<=", 1), "nothing is written beside the cache directory")
			_, err = os.Stat(filepath.Join(repoDir(dir), ".embedops"))
			g.Expect(err).To(MatchError(os.ErrNotExist), "no manifest marks the snapshot complete")
		})
	}
}

func TestRunWithAllBackendsCachesWhatAnyBackendReads(t *testing.T) {
	repo := hubtest.MultiFormatRepository(1024)
	onnx := []string{"onnx/model.onnx", "tokenizer_config.json"}
	cases := []struct {
		name  string
		image string
		files []hubtest.File
		want  []string
	}{
		{"whatever the image", cpuImage, repo, append(slices.Clone(routerFiles), append(onnx, "model.safetensors", "modules.json")...)},
		{"without an image", "", repo, append(slices.Clone(routerFiles), append(onnx, "model.safetensors", "modules.json")...)},
		{"the Dense modules candle reads, for a python image", hpuImage, denseFiles(repo), append(slices.Clone(routerFiles),
			append(onnx, "model.safetensors", "modules.json", "2_Dense/config.json", "2_Dense/model.safetensors")...)},
		{"tokenizer_config.json, which ORT asks for without ONNX weights", cudaImage, without(repo, "onnx/"),
			append(slices.Clone(routerFiles), "tokenizer_config.json", "model.safetensors", "modules.json")},
		{"ONNX weights only, which ORT loads", cudaImage, without(repo, "model.safetensors", "pytorch_model.bin"), append(slices.Clone(routerFiles), onnx...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			commit := hub.AddCommit(testModel, "main", tc.files...)
			dir := t.TempDir()
			opts := options(t, hub, dir, &sleeper{})
			opts.Image, opts.AllBackends = tc.image, true

			result, err := populate.Run(context.Background(), opts)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(result.Names).To(ConsistOf(tc.want))
			for _, name := range tc.want {
				_, cached := hfHubGet(dir, commit, name)
				g.Expect(cached).To(BeTrue(), name)
			}
		})
	}
}

func TestRunWithAllBackendsServesEveryImage(t *testing.T) {
	repo := hubtest.MultiFormatRepository(256)
	repositories := map[string][]hubtest.File{
		"every format":           repo,
		"no ONNX":                without(repo, "onnx/"),
		"a Dense module":         denseFiles(repo),
		"sharded safetensors":    shardedFiles(repo),
		"no safetensors":         without(repo, "model.safetensors"),
		"ONNX weights only":      without(repo, "model.safetensors", "pytorch_model.bin"),
		"no tokenizer config":    without(repo, "tokenizer_config.json"),
		"pytorch_model.bin only": without(repo, "model.safetensors", "onnx/"),
	}
	images := []string{cpuImage, "ghcr.io/huggingface/text-embeddings-inference:cpu-arm64-1.9", cudaImage, hpuImage, customImage}
	for name, files := range repositories {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			hub := hubtest.New(t)
			hub.AddCommit(testModel, "main", files...)
			all := options(t, hub, t.TempDir(), &sleeper{})
			all.AllBackends = true
			union, err := populate.Run(context.Background(), all)
			g.Expect(err).NotTo(HaveOccurred())

			served := 0
			for _, image := range images {
				opts := options(t, hub, t.TempDir(), &sleeper{})
				opts.Image = image
				one, err := populate.Run(context.Background(), opts)
				if errors.Is(err, populate.ErrNoWeights) {
					continue // TEI on this image cannot load the model either
				}
				g.Expect(err).NotTo(HaveOccurred(), image)
				g.Expect(union.Names).To(ContainElements(one.Names), "the shared cache holds what %s reads", image)
				served++
			}
			g.Expect(served).To(BeNumerically(">", 0), "some image loads the model")
		})
	}
}
