// Package act carries out what the EmbeddingServer reconciler decided. It
// holds the reconciler's only clients that write, so every write the
// reconciler makes to the API server, outside the ledger, is one of its
// methods:
//   - Writer: the children (ssa's staged apply, a create by server-side
//     apply, dry runs), populate Jobs, cache claims' labels, old
//     StatefulSets' scale, and deletes with a UID precondition;
//   - ServerPatcher: the server's finalizer and its one status patch;
//   - RecordingWriter: the server's writes, each recorded
//     (writes.Versions), so a later read of a cache that is behind goes to
//     the API server.
//
// It decides nothing: each method writes what it is given, with the
// precondition it is given, and returns the API server's answer. The
// reads it makes are a write's own (ssa's GET and dry run, the status
// patcher's read after a Conflict). It must not touch ModelCacheBindings:
// the ledger writes them. What to write, and when, is the reconciler's.
package act
