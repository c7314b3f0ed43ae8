package populate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNoWeights is wrapped when a model lacks a file TEI requires or has no
// weights the image's backends can load.
var ErrNoWeights = errors.New("no weights TEI can load")

// stConfigNames are the Sentence Transformers configuration names TEI tries,
// in order, keeping the first it finds (TEI core/src/download.rs,
// ST_CONFIG_NAMES).
var stConfigNames = []string{
	"sentence_bert_config.json",
	"sentence_roberta_config.json",
	"sentence_distilbert_config.json",
	"sentence_camembert_config.json",
	"sentence_albert_config.json",
	"sentence_xlm-roberta_config.json",
	"sentence_xlnet_config.json",
}

// Files TEI reads by name.
const (
	configFile           = "config.json"
	tokenizerFile        = "tokenizer.json"
	poolingConfigFile    = "1_Pooling/config.json"
	stConfigFile         = "config_sentence_transformers.json"
	tokenizerConfigFile  = "tokenizer_config.json"
	safetensorsFile      = "model.safetensors"
	safetensorsIndexFile = "model.safetensors.index.json"
	pytorchFile          = "pytorch_model.bin"
	modulesFile          = "modules.json"
	denseModuleType      = "sentence_transformers.models.Dense"
)

// moduleTypes are the module types TEI's modules.json parser knows (TEI
// backends/src/lib.rs, ModuleType).
var moduleTypes = []string{
	denseModuleType,
	"sentence_transformers.models.Normalize",
	"sentence_transformers.models.Pooling",
	"sentence_transformers.models.Transformer",
}

// reader returns the content of a listed file, downloading it first. TEI
// reads some files to learn which others it needs.
type reader func(name string) ([]byte, error)

// teiReads returns the files of a commit TEI reads when it runs backends
// (nil: any backend, for an image whose backends are unknown), in the order
// TEI asks for them. listed holds the commit's file names.
func teiReads(listed []string, backends []Backend, read reader) ([]string, error) {
	has := func(name string) bool { return slices.Contains(listed, name) }
	// TEI router/src/lib.rs and core/src/download.rs: config.json and
	// tokenizer.json are required; the pooling and Sentence Transformers
	// configurations are read when present.
	for _, required := range []string{configFile, tokenizerFile} {
		if !has(required) {
			return nil, fmt.Errorf("%w: the model has no %s, which TEI requires", ErrNoWeights, required)
		}
	}
	names := []string{poolingConfigFile}
	if i := slices.IndexFunc(stConfigNames, has); i >= 0 {
		names = append(names, stConfigNames[i])
	}
	names = append(names, stConfigFile, configFile, tokenizerFile)
	weights, err := backendReads(listed, has, backends, read)
	if err != nil {
		return nil, err
	}
	names = append(names, weights...)
	out := make([]string, 0, len(names))
	for _, name := range names {
		if has(name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// backendReads follows TEI backends/src/lib.rs init_backend: each backend
// in turn downloads its files and starts; the first that starts is used. A
// backend without weights does not start and the next is tried; what it
// asked for first is still read. With no backends given, every backend's
// files are returned: ORT's and candle's, which include python's (python
// downloads what candle does but the Dense modules).
func backendReads(listed []string, has func(string) bool, backends []Backend, read reader) ([]string, error) {
	union := len(backends) == 0
	if union {
		backends = []Backend{BackendORT, BackendCandle}
	}
	var names []string
	started := false
	for _, backend := range backends {
		files, starts, err := backendFiles(backend, listed, has, read)
		if err != nil {
			return nil, err
		}
		names = append(names, files...)
		started = started || starts
		if starts && !union {
			break
		}
	}
	if !started {
		return nil, fmt.Errorf("%w: no ONNX, safetensors or pytorch_model.bin weights for backends %v", ErrNoWeights, backends)
	}
	return names, nil
}

// backendFiles returns the files one backend reads, and whether it starts
// with them: whether the model has weights it loads.
func backendFiles(backend Backend, listed []string, has func(string) bool, read reader) ([]string, bool, error) {
	if backend == BackendORT {
		files, starts := onnxReads(listed, has)
		return files, starts, nil
	}
	files, err := weightReads(has, read)
	if err != nil || len(files) == 0 || backend != BackendCandle {
		return files, len(files) > 0, err
	}
	dense, err := denseReads(has, read)
	return append(files, dense...), true, err
}

// onnxReads are the ORT backend's files, and whether it starts: every
// listed name starting with "model.onnx" or "onnx/model.onnx" (TEI
// backends/src/lib.rs, download_onnx), then tokenizer_config.json for the
// padding side, which init_backend asks for whether or not ONNX weights were
// found. ORT starts only with ONNX weights.
func onnxReads(listed []string, has func(string) bool) ([]string, bool) {
	var names []string
	for _, name := range listed {
		if strings.HasPrefix(name, "model.onnx") || strings.HasPrefix(name, "onnx/model.onnx") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	starts := len(names) > 0
	if has(tokenizerConfigFile) {
		names = append(names, tokenizerConfigFile)
	}
	return names, starts
}

// weightReads are the candle and python backends' weights:
// model.safetensors, else the index and the shards its weight_map names,
// else pytorch_model.bin (TEI backends/src/lib.rs, download_safetensors and
// init_backend). None when the model has none of them.
func weightReads(has func(string) bool, read reader) ([]string, error) {
	switch {
	case has(safetensorsFile):
		return []string{safetensorsFile}, nil
	case has(safetensorsIndexFile):
		data, err := read(safetensorsIndexFile)
		if err != nil {
			return nil, err
		}
		var index struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &index); err != nil || len(index.WeightMap) == 0 {
			return nil, fmt.Errorf("%w: %s has no weight_map", ErrNoWeights, safetensorsIndexFile)
		}
		names := []string{safetensorsIndexFile}
		for _, shard := range index.WeightMap {
			if !has(shard) {
				return nil, fmt.Errorf("%w: %s names shard %q, which the model does not have", ErrNoWeights, safetensorsIndexFile, shard)
			}
			if !slices.Contains(names, shard) {
				names = append(names, shard)
			}
		}
		slices.Sort(names[1:])
		return names, nil
	case has(pytorchFile):
		return []string{pytorchFile}, nil
	}
	return nil, nil
}

// denseReads are the candle backend's Dense modules: modules.json, and for
// each module of type Dense its config.json and model.safetensors, else
// pytorch_model.bin (TEI backends/src/lib.rs, download_dense_modules and
// download_dense_module). A modules.json TEI cannot parse gives no modules,
// as in TEI. Not followed: --dense-path, which replaces a single module.
func denseReads(has func(string) bool, read reader) ([]string, error) {
	if !has(modulesFile) {
		return nil, nil
	}
	data, err := read(modulesFile)
	if err != nil {
		return nil, err
	}
	names := []string{modulesFile}
	var modules []struct {
		Idx  *int    `json:"idx"`
		Name *string `json:"name"`
		Path *string `json:"path"`
		Type string  `json:"type"`
	}
	if json.Unmarshal(data, &modules) != nil {
		return names, nil
	}
	for _, m := range modules {
		// TEI's ModuleConfig requires every field and knows four types: a
		// module it cannot parse makes it load no Dense module at all.
		if m.Idx == nil || m.Name == nil || m.Path == nil || !slices.Contains(moduleTypes, m.Type) {
			return names, nil
		}
	}
	for _, m := range modules {
		if m.Type != denseModuleType {
			continue
		}
		path := *m.Path
		if validPath(path) != nil {
			return nil, fmt.Errorf("%w %s: Dense module path %q", ErrInvalid, modulesFile, path)
		}
		config := path + "/" + configFile
		if !has(config) {
			return nil, fmt.Errorf("%w: Dense module %s has no %s", ErrNoWeights, path, configFile)
		}
		names = append(names, config)
		switch {
		case has(path + "/" + safetensorsFile):
			names = append(names, path+"/"+safetensorsFile)
		case has(path + "/" + pytorchFile):
			names = append(names, path+"/"+pytorchFile)
		default:
			return nil, fmt.Errorf("%w: Dense module %s has neither %s nor %s", ErrNoWeights, path, safetensorsFile, pytorchFile)
		}
	}
	return names, nil
}
