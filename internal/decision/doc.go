// Package decision turns an EmbeddingServer's spec into the cache decision a
// ModelCacheBinding records: an identity (what is cached, who may share it),
// the storage decision, and a digest over both.
//
// Invariants:
//   - Pure: no clients, no I/O, no clock. The same spec gives byte-for-byte
//     the same Decision, in the controller and in `embedops audit` alike.
//   - Defaults are applied here, with the values of the CRD schema, so an
//     object read from the API server (defaults filled) and the same manifest
//     read from git (defaults absent) give the same digest.
//   - The digest covers only fields derived from the manifest (and the
//     object's namespace and name), so it can be recomputed from git. The
//     cluster facts (provisioner, StorageClass parameters) are recorded beside
//     it by WithClusterFacts and never change it.
//   - The encoding does not depend on map order, struct field order, list
//     order of set-valued fields, or the suffix a quantity is written with.
//   - A spec the user must fix is an error wrapping ErrInvalidSpec; that
//     includes a cache size outside (0, 8Ei), checked without expanding the
//     quantity, so no manifest can make a decision slow.
//
// # Canonical encoding, version 1
//
// An encoding is a sequence of netstrings, each written as
// "<decimal byte length>:<bytes>,". It starts with a tag naming what is
// encoded and its version, followed by name/value pairs in the fixed order
// below. A list value is the netstring of its decimal element count followed
// by one netstring per element. The digest is "sha256:" followed by the
// lowercase hex SHA-256 of the encoding.
//
// Identity key, tag "embedops.dev/identity/v1":
//
//	model, revision, sharingDomain
//
// Decision digest, tag "embedops.dev/decision/v1":
//
//	model, revision, sharingDomain, key,
//	mode, storageClassName, size, accessModes (list), reclaimPolicy, retainFor
//
// StorageClass parameters digest, tag "embedops.dev/storageclass-parameters/v1":
//
//	parameters (list of key, value, key, value, ... with keys sorted)
//
// Values are written as follows: strings as written (an empty
// storageClassName means the cluster default); size as resource.Quantity's
// canonical string of its value in the decimal-exponent format, which
// depends on the value only ("10Gi", "10240Mi" and "10737418240" all give
// "10737418240"; "10G" gives "10e9"); accessModes sorted and without
// duplicates; retainFor as Go's time.Duration string ("24h0m0s"). A binding
// records the size in canonical binary-SI form ("10Gi") where that is exact.
//
// Changing any of this changes every digest and every binding name: bump the
// version in the tags instead of editing version 1.
package decision
