package main

// teiMetrics are the metrics TEI v1.9.3 exports, by type, as
// router/src/http/server.rs, router/src/lib.rs, core/src/infer.rs,
// core/src/queue.rs and core/src/tokenization.rs name them at the tag
// v1.9.3 of huggingface/text-embeddings-inference (metrics::counter!,
// histogram!, gauge!); its exporter, metrics-exporter-prometheus, adds no
// _total suffix to counters.
var teiMetrics = map[string]metricType{
	"te_request_count":                 counter,
	"te_request_success":               counter,
	"te_request_failure":               counter,
	"te_embed_count":                   counter,
	"te_embed_success":                 counter,
	"te_predict_count":                 counter,
	"te_predict_success":               counter,
	"te_queue_size":                    gauge,
	"te_batch_next_size":               histogram,
	"te_batch_next_tokens":             histogram,
	"te_request_input_length":          histogram,
	"te_request_duration":              histogram,
	"te_request_tokenization_duration": histogram,
	"te_request_queue_duration":        histogram,
	"te_request_inference_duration":    histogram,
	"te_embed_duration":                histogram,
	"te_embed_tokenization_duration":   histogram,
	"te_embed_queue_duration":          histogram,
	"te_embed_inference_duration":      histogram,
	"te_predict_duration":              histogram,
	"te_predict_tokenization_duration": histogram,
	"te_predict_queue_duration":        histogram,
	"te_predict_inference_duration":    histogram,
}
