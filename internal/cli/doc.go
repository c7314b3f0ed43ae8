// Package cli holds the embedops command line: cobra commands that parse
// flags into options and call the packages that do the work. It has no
// business logic and no package-level state.
package cli
