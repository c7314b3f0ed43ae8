// Package tei is the contract between the pods embedops writes and Text
// Embeddings Inference: TEI's command line as its router parses it, rule by
// rule from the upstream source of the version the default image pins.
// The builder's tests parse every container they build with it, and a TEI
// stand-in can refuse what TEI refuses. It is pure: no I/O.
package tei
