package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"time"
)

// router serves the endpoints of TEI's http server (router/src/http/
// server.rs): /health and /metrics in public_routes, /info and /embed in
// routes, behind the API key when there is one. /health and /embed's
// inference wait for b, as TEI's do for its backend.
func router(c config, m *model, mt *metrics, log *slog.Logger, b *backendThread) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", healthHandler(b))
	mux.Handle("GET /metrics", mt.handler())
	mux.Handle("GET /info", authorized(c.apiKey, infoHandler(infoOf(c, m))))
	mux.Handle("POST /embed", authorized(c.apiKey, &embedHandler{
		modelID: c.modelID, model: m, maxBatch: c.maxClientBatch, compute: c.batchCompute, metrics: mt, log: log, backend: b,
	}))
	return mux
}

// healthHandler answers /health once the backend thread has run a health
// command after the work queued before it (TEI v1.9 router/src/http/
// server.rs health calls infer.health, which sends BackendCommand::Health):
// 200, or 503 with TEI's ErrorResponse when the backend is dead.
func healthHandler(b *backendThread) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := b.health(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unhealthy", "error_type": "Unhealthy"})
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// authorized answers 401 unless the request carries "Bearer <key>"
// exactly, when key is set (server.rs: the auth middleware compares the
// Authorization header with the prefixed key).
func authorized(key string, next http.Handler) http.Handler {
	if key == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// infoHandler answers /info.
func infoHandler(i info) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, i) }
}

// embedHandler answers /embed with deterministic embeddings.
type embedHandler struct {
	modelID  string
	model    *model
	maxBatch int
	// compute is how long each batch computes at least (BatchComputeVariable).
	compute time.Duration
	metrics *metrics
	log     *slog.Logger
	backend *backendThread
}

func (h *embedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h.metrics.queueSize.Inc()
	req, status, err := decodeEmbed(r)
	var texts []string
	if err == nil {
		status = http.StatusUnprocessableEntity
		texts, err = req.texts(h.maxBatch)
	}
	// The request leaves the queue: refused, or taken into a batch.
	h.metrics.queueSize.Dec()
	method := "single"
	if len(texts) > 1 {
		method = "batch"
	}
	h.metrics.requestCount.WithLabelValues(method).Inc()
	h.metrics.embedCount.Add(float64(len(texts)))
	if err != nil {
		h.metrics.requestFailure.WithLabelValues("validation").Inc()
		writeJSON(w, status, map[string]string{"error": err.Error(), "error_type": "Validation"})
		return
	}
	h.metrics.batchSize.Observe(float64(len(texts)))
	inference := time.Now()
	h.metrics.queueDuration.Observe(inference.Sub(start).Seconds())
	normalize := req.Normalize == nil || *req.Normalize
	var out [][]float32
	if err := h.backend.embed(r.Context(), func() { out = batchEmbeddings(h.modelID, texts, h.model.dim, normalize, h.compute) }); err != nil {
		h.metrics.requestFailure.WithLabelValues("backend").Inc()
		writeJSON(w, backendErrorStatus(err), map[string]string{"error": "Backend error: " + err.Error(), "error_type": "Backend"})
		return
	}
	h.metrics.inferenceDuration.Observe(time.Since(inference).Seconds())
	h.metrics.embedSuccess.Add(float64(len(texts)))
	h.metrics.requestSuccess.WithLabelValues(method).Inc()
	h.metrics.requestDuration.Observe(time.Since(start).Seconds())
	writeJSON(w, http.StatusOK, out)
}

// backendErrorStatus is the status of a batch that failed with err: 424,
// TEI's for ErrorType::Backend (router/src/http/server.rs), when the
// backend failed it; 503 when the request ended before its turn.
func backendErrorStatus(err error) int {
	if errors.Is(err, errBackendDead) {
		return http.StatusFailedDependency
	}
	return http.StatusServiceUnavailable
}

// decodeEmbed reads the JSON body as axum's Json extractor does: 415
// without a JSON content type, 400 on a syntax error, 422 on a body of the
// wrong shape.
func decodeEmbed(r *http.Request) (embedRequest, int, error) {
	var req embedRequest
	if media, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || media != "application/json" {
		return req, http.StatusUnsupportedMediaType, errContentType
	}
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		return req, http.StatusBadRequest, err
	}
	if _, ok := raw["inputs"]; !ok {
		return req, http.StatusUnprocessableEntity, errNoInputs
	}
	req.Inputs = raw["inputs"]
	if n, ok := raw["normalize"]; ok {
		if err := json.Unmarshal(n, &req.Normalize); err != nil {
			return req, http.StatusUnprocessableEntity, err
		}
	}
	return req, 0, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
