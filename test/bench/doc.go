// Package bench measures embedops on the local kwok cluster with the
// controller run as its own process, so that its CPU and memory are its
// own, counting requests where the API server sees them: in its audit log.
// `make bench` runs cmd/bench; BenchmarkServerWrites runs with
// `go test -bench`; neither is part of the test command.
// TestControllerWritesNothingAtRest is: it checks, on three servers, the
// figures the benchmark reports as zero.
//
// Waits poll the cluster (wait.PollUntilContextTimeout); the only timed
// intervals are the rest windows, which measure a quiet controller.
package bench
