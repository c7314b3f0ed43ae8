// Package populate downloads a model repository from the HuggingFace hub into
// the cache layout that Text Embeddings Inference and the HuggingFace
// libraries read, so a server starts from a warm cache. It runs in init
// containers and Jobs (`embedops populate`).
//
// # Hub API
//
// The endpoint comes from HF_ENDPOINT (default DefaultEndpoint) and the token
// from HF_TOKEN, sent as "Authorization: Bearer" and never logged. Two calls
// are used:
//
//	GET {endpoint}/api/models/{model}/revision/{revision}?blobs=true
//	GET {endpoint}/{model}/resolve/{commit}/{file}
//
// The first resolves the revision to a commit ("sha") and lists the files
// ("siblings"), each with "size", "blobId" (the git blob id) and, for LFS
// files, "lfs": {"sha256", "size"}. Files are then fetched by commit, so a
// branch that moves during a download cannot mix two commits.
//
// The listing is the source of truth for names, sizes and digests when it
// carries them. Hub mirrors and some proxies list names only: then each file
// is first asked for with a HEAD request that follows relative redirects
// only, as huggingface_hub's get_hf_file_metadata does, so the headers are
// the hub's and not its CDN's. X-Linked-Etag (an LFS file's sha256) with
// X-Linked-Size, or else ETag (a git blob id) with Content-Length, gives
// the blob and what the content must match; a file with neither is refused
// (ErrInvalid), since nothing could verify it. The listing's values and
// these headers name blobs as other HuggingFace clients do, so they share
// the blobs written here.
//
// # What is downloaded
//
// Only the files TEI reads (Options.Image; every file without an image;
// what any backend reads with Options.AllBackends, for a Shared cache that
// servers running different images read). TEI's router reads config.json,
// tokenizer.json, 1_Pooling/config.json, the first Sentence Transformers
// configuration of ST_CONFIG_NAMES and config_sentence_transformers.json
// (TEI router/src/lib.rs, core/src/download.rs). Its backends (backends/src/lib.rs) add their
// weights, tried in order until one starts: ORT the listed "model.onnx*"
// and "onnx/model.onnx*" files, and tokenizer_config.json even when there
// are none; candle and python model.safetensors, else the index and the
// shards it names, else pytorch_model.bin; candle also modules.json and the
// Dense modules it names. BackendsOf says which backends an image tag runs;
// an image whose backends are unknown, or AllBackends, gets the union of
// ORT's and candle's files, which holds python's. A model without
// config.json, tokenizer.json or weights the backends load is refused with
// ErrNoWeights before anything but the files naming others is downloaded.
//
// # Verification
//
// An LFS file must have the listed size and sha256. Any other file must have
// the listed size and git blob id (sha1 over "blob <size>\x00" and the
// content); its sha256 is computed while it is read and recorded. A file is
// written to blobs/<blob>.incomplete and renamed into place only once it
// verifies. A resumed download (an HTTP Range request from the length of the
// .incomplete file) that fails verification is restarted once from zero; a
// fresh download that fails is refused with ErrCorrupt and removed.
//
// A snapshot the cache already holds, whose manifest marks it complete for
// the files this run caches, is checked as Options.Verify says. VerifySizes
// (the default) checks that each file links to its blob and that the blob
// has the size the manifest records, and reads no content: a pod's start
// takes the same time whatever the model's size, and returns the result of
// the run that wrote the manifest, after writing the refs again if they
// were lost. VerifyFull hashes every blob again. A
// manifest that cannot be read, does not match its own records or is of
// other files, and a file that fails the check, lead to the path of a first
// download: every blob in place is hashed again, and replaced if damaged.
//
// # Cache layout
//
// Under the cache directory (HUGGINGFACE_HUB_CACHE), for model "org/name"
// (a model without an org is "models--name"):
//
//	models--org--name/blobs/<blob>                   file content; <blob> is the lfs sha256 or the git blob id
//	models--org--name/blobs/<blob>.incomplete        a download in progress, resumed on the next run
//	models--org--name/snapshots/<commit>/<file>      relative symlink to ../../blobs/<blob> (one more ../ per subfolder)
//	models--org--name/refs/<revision>                the commit, also for a commit revision (TEI's hf-hub reads it)
//	models--org--name/refs/<commit>                  the commit itself, so TEI started on --revision=<commit> finds the snapshot
//	models--org--name/.embedops/<commit>.json        manifest: names, blobs, sizes, sha256s and the content digest
//	.locks/models--org--name/<blob>.lock             advisory lock held while a blob is written
//	.locks/models--org--name/folder.lock             advisory lock on the model's folder: shared, or exclusive to prune
//
// Links, refs and manifests are replaced atomically, by a rename from a
// uniquely named temporary file. The manifest is written last and marks a
// snapshot complete. The HuggingFace
// libraries and TEI never read .embedops; populate needs the manifest to
// check a snapshot without reading it and to serve a run without the hub,
// because a snapshot directory alone cannot tell a finished download from an
// interrupted one. The lock files use the path the HuggingFace Python library
// locks, so concurrent populators sharing a volume (cache mode Shared) wait
// for each other instead of writing the same .incomplete file; where locking
// is unsupported a warning is logged and verification still guards the
// result.
//
// # Pruning
//
// Only with Options.Prune (`embedops populate --prune`; nothing is deleted
// otherwise, as huggingface_hub deletes only when asked), a run that
// downloads a new commit first deletes every snapshot a manifest marks
// complete except that commit's and the one the last successful run left
// (.embedops/latest), also when that is the commit fetched, following
// huggingface_hub's rule for deleting a revision (utils/_cache_manager.py,
// HFCacheInfo.delete_revisions): the refs naming it, its snapshot folder,
// the blobs no other snapshot links, then its manifest. A blob a kept
// manifest names stays, linked or not. Snapshots other programs wrote (no
// manifest) are never pruned, nor is anything when the hub's listing lacks
// a file's blob id (a mirror's names-only listing cannot say which blobs
// the new commit wants). A PerReplica claim is only ever mounted by its one
// replica's pod, so the pod that served the last commit is gone when its
// successor's init container prunes; that commit is kept anyway, for a
// rollback. Such a run also reports its filesystem's free bytes (statfs)
// and what pruning for the next commit would free (Result.FreeBytes,
// Result.ReclaimableBytes). A pruning run holds the model's folder lock
// exclusively from its first write to its end, and every other run holds it
// shared, so pruning never deletes what another populator fetches or
// checks; where locks are unsupported nothing is pruned. TEI and the
// HuggingFace libraries take no such lock: the controller prunes only where
// one pod mounts a claim (a PerReplica claim's init container) or one Job
// writes it (a Shared claim's, podReplacementPolicy Failed).
//
// # Resuming without the hub
//
// A revision that is a full commit id whose snapshot is complete on disk is
// checked and returned without contacting the hub. Otherwise the hub is
// asked first; when it stays unreachable (network errors, 429 or 5xx after
// the bounded retries) the commit is read from refs/<revision> (or is the
// revision itself) and the snapshot is checked on disk against its
// manifest. A refusal (401, 403) or a 404 from the hub is final and never
// answered from the cache.
//
// # Network
//
// The default client takes the settings TEI's HTTP client takes from the
// environment: the proxy from HTTPS_PROXY, HTTP_PROXY and NO_PROXY or their
// lowercase forms (http.ProxyFromEnvironment), and the certificate
// authorities from the system roots, which SSL_CERT_FILE (a bundle, in place
// of the system's) and SSL_CERT_DIR replace when set (crypto/x509's
// root_unix.go). EnvOptions reads the hub's settings as huggingface_hub
// does: HF_ENDPOINT, HF_TOKEN, and HF_HUB_DOWNLOAD_TIMEOUT and
// HF_HUB_ETAG_TIMEOUT in whole seconds.
//
// # Content digest, version 1
//
// The content digest is "sha256:" followed by the lowercase hex SHA-256 of an
// encoding made of netstrings ("<decimal byte length>:<bytes>,"), as in
// package decision:
//
//	netstring("embedops.dev/content/v1")
//	netstring(decimal number of files)
//	for each file, sorted by name (bytewise):
//	    netstring(name)    the path in the repository, "/"-separated
//	    netstring(sha256)  64 lowercase hex digits of the file's content
//
// It depends on the files' names and contents only: not on the hub's listing
// order, on LFS or not, or on the commit. Changing the encoding changes every
// recorded digest: bump the version in the tag instead of editing version 1.
package populate
