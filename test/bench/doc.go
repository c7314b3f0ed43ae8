// Package bench measures embedops on the local kwok cluster, counting
// requests where the API server sees them: in its audit log. Benchmarks run
// with `go test -bench`, never as part of the test command.
package bench
