package main

import (
	"runtime"
	"slices"
	"strconv"
)

// version is the TEI version the stand-in plays.
const version = "1.9.3"

// info is /info's answer (router/src/lib.rs, Info): model_id is --model-id
// and model_sha is --revision, both as given, never resolved
// (`model_sha: revision`); model_sha is null when no revision was given.
type info struct {
	ModelID               string    `json:"model_id"`
	ModelSHA              *string   `json:"model_sha"`
	ModelDType            string    `json:"model_dtype"`
	ModelType             modelType `json:"model_type"`
	MaxConcurrentRequests int       `json:"max_concurrent_requests"`
	MaxInputLength        int       `json:"max_input_length"`
	MaxBatchTokens        int       `json:"max_batch_tokens"`
	MaxBatchRequests      *int      `json:"max_batch_requests"`
	MaxClientBatchSize    int       `json:"max_client_batch_size"`
	AutoTruncate          bool      `json:"auto_truncate"`
	TokenizationWorkers   int       `json:"tokenization_workers"`
	Version               string    `json:"version"`
}

// modelType is Info's ModelType of an embedding model.
type modelType struct {
	Embedding struct {
		Pooling string `json:"pooling"`
	} `json:"embedding"`
}

// infoOf is what /info reports of a loaded model.
func infoOf(c config, m *model) info {
	i := info{
		ModelID:               c.modelID,
		ModelDType:            dtype(c),
		MaxConcurrentRequests: atoi(c.args.Value("max_concurrent_requests")),
		MaxInputLength:        m.maxInput,
		MaxBatchTokens:        atoi(c.args.Value("max_batch_tokens")),
		MaxClientBatchSize:    c.maxClientBatch,
		AutoTruncate:          c.args.Value("auto_truncate") == "true",
		TokenizationWorkers:   runtime.NumCPU(),
		Version:               version,
	}
	i.ModelType.Embedding.Pooling = m.pooling
	if revision, ok := c.args.Lookup("revision"); ok {
		i.ModelSHA = &revision
	}
	if n, ok := c.args.Lookup("max_batch_requests"); ok {
		v := atoi(n)
		i.MaxBatchRequests = &v
	}
	if workers, ok := c.args.Lookup("tokenization_workers"); ok {
		i.TokenizationWorkers = atoi(workers)
	}
	return i
}

// dtype is --dtype, else float32 on the cpu images (those with ORT) and
// float16 on the CUDA images (router/src/lib.rs, the dtype default by
// build feature).
func dtype(c config) string {
	if d, ok := c.args.Lookup("dtype"); ok {
		return d
	}
	if slices.Contains(c.backends, backendORT) {
		return "float32"
	}
	return "float16"
}

// atoi reads a number tei.Parse already checked.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
