package main

import (
	"io"
	"log/slog"
)

// target is the tracing target of the router's own log lines.
const target = "text_embeddings_router"

// newLogger logs as TEI's tracing subscriber does (router/src/logging.rs):
// JSON lines with "timestamp", "level", "message" and "target" under
// --json-output, text lines otherwise.
func newLogger(w io.Writer, jsonOutput bool) *slog.Logger {
	opts := &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) > 0 {
			return a
		}
		switch a.Key {
		case slog.TimeKey:
			a.Key = "timestamp"
		case slog.MessageKey:
			a.Key = "message"
		}
		return a
	}}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if jsonOutput {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h).With("target", target)
}
