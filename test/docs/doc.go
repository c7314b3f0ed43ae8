// Package docs checks that the documentation names only what exists: every
// code span of docs/*.md and README.md is classified (a repository path, a Go
// identifier, a test, an `embedops` command or flag, a make target, a field of
// the CRDs or the chart's values, a string the code or config uses, or a
// name an upstream program owns) and looked up in the working tree, so a
// renamed function or a removed command fails a test instead of drifting.
// The figures of docs/design.md's code map, the files it says the phases
// live in and the values it states for constants ("`CreatorGrace` (30 s)")
// are computed and compared too.
//
// Nothing here talks to a cluster: the tree is read with go/parser, the CRD
// and chart YAML, the Makefile and the CLI's cobra command tree.
package docs
