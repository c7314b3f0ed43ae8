package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// defaultDim is the embedding size of a config.json without hidden_size.
const defaultDim = 384

// model is what the router loaded.
type model struct {
	modelType string
	dim       int
	maxInput  int
	pooling   string
	backend   string
}

// modelConfig is the part of config.json the stand-in reads (TEI
// backends/core, ModelConfig: model_type, hidden_size,
// max_position_embeddings).
type modelConfig struct {
	ModelType             string `json:"model_type"`
	HiddenSize            int    `json:"hidden_size"`
	MaxPositionEmbeddings int    `json:"max_position_embeddings"`
}

// poolConfig is 1_Pooling/config.json (router/src/lib.rs, PoolConfig).
type poolConfig struct {
	CLS        bool `json:"pooling_mode_cls_token"`
	Mean       bool `json:"pooling_mode_mean_tokens"`
	LastToken  bool `json:"pooling_mode_lasttoken"`
	Splade     bool `json:"pooling_mode_splade"`
	MaxTokens  bool `json:"pooling_mode_max_tokens"`
	MeanSqrtLn bool `json:"pooling_mode_mean_sqrt_len_tokens"`
}

// load gets the model's files in TEI's order and checks what TEI checks:
// the pooling configuration when --pooling is absent, config.json and
// tokenizer.json (core/src/download.rs, download_artifacts), then the
// weights of the first backend that starts (backends/src/lib.rs,
// init_backend).
func load(ctx context.Context, c config, f files, log *slog.Logger) (*model, error) {
	var poolPath string
	if c.pooling == "" {
		poolPath, _ = f.get(ctx, "1_Pooling/config.json")
	}
	configPath, err := f.get(ctx, "config.json")
	if err != nil {
		return nil, fmt.Errorf("could not download model artifacts: %w", err)
	}
	if _, err := f.get(ctx, "tokenizer.json"); err != nil {
		return nil, fmt.Errorf("could not download model artifacts: %w", err)
	}
	var mc modelConfig
	if err := readJSON(configPath, &mc); err != nil {
		return nil, fmt.Errorf("failed to parse `config.json`: %w", err)
	}
	m := &model{modelType: mc.ModelType, dim: mc.HiddenSize, maxInput: mc.MaxPositionEmbeddings}
	if m.dim <= 0 {
		m.dim = defaultDim
	}
	if m.pooling, err = pooling(c.pooling, poolPath, mc.ModelType, log); err != nil {
		return nil, err
	}
	if m.backend, err = startBackend(ctx, c.backends, f, log); err != nil {
		return nil, fmt.Errorf("could not create backend: %w", err)
	}
	return m, nil
}

// pooling is --pooling, else the pooling configuration's, else CLS with a
// warning for a BERT variant (router/src/lib.rs, the Embedding arm of
// model_type).
func pooling(flag, poolPath, modelType string, log *slog.Logger) (string, error) {
	if flag != "" {
		return flag, nil
	}
	var pc poolConfig
	if poolPath == "" || readJSON(poolPath, &pc) != nil {
		if !strings.Contains(strings.ToLower(modelType), "bert") {
			return "", errors.New("the `--pooling` arg is not set and we could not find a pooling configuration (`1_Pooling/config.json`) for this model")
		}
		log.Warn("The `--pooling` arg is not set and we could not find a pooling configuration (`1_Pooling/config.json`) for this model but the model is a BERT variant. Defaulting to `CLS` pooling.")
		return "cls", nil
	}
	// PoolConfig's TryFrom: the first mode set, in this order.
	for _, mode := range []struct {
		set  bool
		name string
	}{{pc.CLS, "cls"}, {pc.Mean, "mean"}, {pc.Splade, "splade"}, {pc.LastToken, "last-token"}} {
		if mode.set {
			return mode.name, nil
		}
	}
	return "", errors.New("pooling config is not supported")
}

// startBackend tries each backend in turn; the first whose weights it gets
// starts (backends/src/lib.rs, init_backend).
func startBackend(ctx context.Context, backends []string, f files, log *slog.Logger) (string, error) {
	var errs []error
	for _, backend := range backends {
		err := getWeights(ctx, backend, f)
		if err == nil {
			log.Info("Starting model backend", "backend", backend)
			return backend, nil
		}
		log.Warn("Could not start backend", "backend", backend, "error", err.Error())
		errs = append(errs, fmt.Errorf("%s: %w", backend, err))
	}
	return "", errors.Join(errs...)
}

// getWeights gets a backend's weights: for ORT model.onnx, else
// onnx/model.onnx, and tokenizer_config.json when there is one
// (download_onnx); for candle model.safetensors, else pytorch_model.bin
// (download_safetensors; sharded weights are not played).
func getWeights(ctx context.Context, backend string, f files) error {
	candidates := []string{"model.safetensors", "pytorch_model.bin"}
	if backend == backendORT {
		candidates = []string{"model.onnx", "onnx/model.onnx"}
	}
	var errs []error
	for _, name := range candidates {
		_, err := f.get(ctx, name)
		if err == nil {
			if backend == backendORT {
				_, _ = f.get(ctx, "tokenizer_config.json")
			}
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
