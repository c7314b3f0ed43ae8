// Command tei stands in for text-embeddings-router, the server of TEI
// v1.9.3 images, on a real node: it follows TEI where the operator depends
// on it, each rule naming the upstream file it follows.
//
//   - The command line and environment parse as router/src/main.rs declares
//     them (package tei); a refused command line exits 2 with clap's
//     message.
//   - The model's files come from the hub cache as hf-hub 0.4's
//     CacheRepo::get finds them (refs/<revision>, then
//     snapshots/<commit>/<file>), else from HF_ENDPOINT into that cache; a
//     model it cannot load ends the process with status 1.
//   - Which weights it loads follows the backends of the image it plays
//     (EMBEDOPS_STANDIN_BACKENDS, "ort,candle" as the cpu images try them
//     by default; "candle" for the CUDA images).
//   - It serves /health, /info, /embed and /metrics on --hostname:--port,
//     /metrics also on --prometheus-port, with --api-key guarding /info and
//     /embed only; embeddings are deterministic, not a model's.
//   - /health and /embed's inference share one backend thread, as TEI's
//     BackendCommand channel does (backends/src/lib.rs): /health answers
//     only after the batches queued before it. Each /embed request is one
//     batch, computing for at least EMBEDOPS_STANDIN_BATCH_COMPUTE when set,
//     so that a test can saturate the thread. TEI merges queued requests
//     into one batch (core/src/queue.rs) and hands its backend one batch at
//     a time (core/src/infer.rs, backend_task), so a saturated TEI misses a
//     probe's timeout when one batch takes longer than it.
//   - EMBEDOPS_STANDIN_BACKEND_DIES_AT_BATCH=n kills the backend at its
//     n-th /embed batch, as a CUDA error kills TEI's: that batch and every
//     one after it fail with 424, /health answers 503 at once, and the
//     port stays open (backends/src/lib.rs, Backend::health).
package main
