package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// embedRequest is /embed's body (router/src/http/types.rs, EmbedRequest):
// inputs is a string or a list of strings; normalize defaults to true.
type embedRequest struct {
	Inputs    json.RawMessage `json:"inputs"`
	Normalize *bool           `json:"normalize"`
}

// texts returns the request's inputs as a batch, refusing what TEI's
// validation refuses (router/src/http/server.rs, embed).
func (r embedRequest) texts(maxBatch int) ([]string, error) {
	var one string
	if err := json.Unmarshal(r.Inputs, &one); err == nil {
		return []string{one}, nil
	}
	var batch []string
	if err := json.Unmarshal(r.Inputs, &batch); err != nil {
		return nil, fmt.Errorf("inputs: want a string or a list of strings: %w", err)
	}
	if len(batch) == 0 {
		return nil, errors.New("`inputs` cannot be empty")
	}
	if len(batch) > maxBatch {
		return nil, fmt.Errorf("batch size %d > maximum allowed batch size %d", len(batch), maxBatch)
	}
	return batch, nil
}

// embedding is a deterministic stand-in for a model's embedding of text:
// dim values in [-1, 1) drawn from sha256 of the model id and the text,
// scaled to unit length when normalize is set.
func embedding(modelID, text string, dim int, normalize bool) []float32 {
	out := make([]float32, 0, dim)
	for block := uint32(0); len(out) < dim; block++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", modelID, text, block))
		for i := 0; i+4 <= len(sum) && len(out) < dim; i += 4 {
			u := binary.BigEndian.Uint32(sum[i:])
			out = append(out, float32(float64(u)/(1<<31)-1))
		}
	}
	if normalize {
		var norm float64
		for _, v := range out {
			norm += float64(v) * float64(v)
		}
		if norm > 0 {
			scale := float32(1 / math.Sqrt(norm))
			for i := range out {
				out[i] *= scale
			}
		}
	}
	return out
}

// Refusals of /embed's body.
var (
	errContentType = errors.New("expected request with `Content-Type: application/json`")
	errNoInputs    = errors.New("missing field `inputs`")
)

// batchEmbeddings embeds a batch, and embeds it again until compute has
// passed since it began: a batch that takes compute of real work on the
// backend thread, as a large batch of a real model does.
func batchEmbeddings(modelID string, texts []string, dim int, normalize bool, compute time.Duration) [][]float32 {
	began := time.Now()
	out := make([][]float32, len(texts))
	for {
		for i, text := range texts {
			out[i] = embedding(modelID, text, dim, normalize)
		}
		if time.Since(began) >= compute {
			return out
		}
	}
}
