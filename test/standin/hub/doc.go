// Command hub serves a stand-in HuggingFace hub (package hubtest's Hub, which
// follows what TEI's and embedops' hub clients read) over HTTP on an
// address, for pods on a real node to download models from through
// HF_ENDPOINT. Its models come from flags or a JSON file; each commit it
// makes is printed on stdout as a JSON line, so a test knows which commit a
// branch names. LFS files are redirected to the host a request came to.
// -rate-bytes-per-second bounds how fast each file response is sent, and
// GET /_standin/bytes answers the file bytes sent to each client IP as a
// JSON object, so a benchmark on the node can tell what each pod downloaded.
package main
