package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	// TEI shuts down on SIGINT and SIGTERM (router/src/shutdown.rs).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], environment(os.Environ()), os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// environment maps "NAME=value" entries to their values.
func environment(entries []string) map[string]string {
	env := make(map[string]string, len(entries))
	for _, entry := range entries {
		if name, value, ok := strings.Cut(entry, "="); ok {
			env[name] = value
		}
	}
	return env
}
