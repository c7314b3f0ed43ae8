package populate

import (
	"strings"
)

// Backend is a TEI model backend. Which backends an image runs decides
// which weight files TEI reads, and so which files populate downloads.
type Backend string

const (
	// BackendORT is ONNX Runtime: it reads onnx/ (TEI backends/src/lib.rs,
	// download_onnx).
	BackendORT Backend = "ort"
	// BackendCandle reads the safetensors set, else pytorch_model.bin, and
	// the Dense modules named by modules.json (TEI backends/src/lib.rs,
	// download_safetensors, download_dense_modules).
	BackendCandle Backend = "candle"
	// BackendPython reads the safetensors set, else pytorch_model.bin, with
	// no Dense modules (TEI backends/src/lib.rs: the download is shared with
	// candle, download_dense_modules is candle only).
	BackendPython Backend = "python"
)

// teiRepository is the last path element of TEI's image repository.
const teiRepository = "text-embeddings-inference"

// imageBackends maps a TEI image tag prefix to the backends the image is
// built with, in the order TEI's init_backend tries them. The prefixes are
// TEI's .github/workflows/matrix.json imageNamePrefix values; the features
// are the cargo build lines of the Dockerfile each entry names:
//
//	Dockerfile, Dockerfile-arm64 (cpu-, cpu-arm64-):  ort,candle
//	Dockerfile-intel (cpu-ipex-, xpu-ipex-, hpu-):    python
//	Dockerfile-cuda, Dockerfile-cuda-all (any other): candle
//
// Longer prefixes come first.
var imageBackends = []struct {
	prefix   string
	backends []Backend
}{
	{"cpu-ipex-", []Backend{BackendPython}},
	{"xpu-ipex-", []Backend{BackendPython}},
	{"hpu-", []Backend{BackendPython}},
	{"cpu-arm64-", []Backend{BackendORT, BackendCandle}},
	{"cpu-", []Backend{BackendORT, BackendCandle}},
}

// BackendsOf returns the backends a TEI image runs, in the order TEI tries
// them, and whether the image is a TEI release image whose tag says so. Any
// other image (a custom build, a digest without a tag) returns false: then
// populate caches what any backend may read.
func BackendsOf(image string) ([]Backend, bool) {
	name, _, _ := strings.Cut(image, "@")
	slash := strings.LastIndex(name, "/")
	repository, tag, ok := strings.Cut(name[slash+1:], ":")
	if repository != teiRepository || !ok || tag == "" {
		return nil, false
	}
	for _, entry := range imageBackends {
		if strings.HasPrefix(tag, entry.prefix) {
			return entry.backends, true
		}
	}
	// The CUDA images: "" (ampere-80), 86-, 89-, turing-, hopper-, 100-,
	// 120-, 121- (Dockerfile-cuda) and cuda- (Dockerfile-cuda-all).
	return []Backend{BackendCandle}, true
}
