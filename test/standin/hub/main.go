package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return fmt.Sprint([]string(*l)) }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var opts options
	var models stringList
	flag.StringVar(&opts.addr, "addr", ":8080", "The address to serve the hub on.")
	flag.StringVar(&opts.modelsFile, "models", "", "A JSON file of models to serve: {\"models\": [{\"id\", \"branch\", \"commit\", \"repository\": \"multi-format\", \"unit\", \"without\", \"files\"}]}.")
	flag.Var(&models, "model", "A model id to serve on main with a multi-format repository of -unit byte weights; repeatable.")
	flag.IntVar(&opts.unit, "unit", 4096, "The size of one copy of the weights of each -model.")
	flag.StringVar(&opts.token, "token", "", "A token the hub requires as \"Authorization: Bearer <token>\"; none if empty.")
	flag.IntVar(&opts.rateBytesPerSecond, "rate-bytes-per-second", 0, "The most bytes per second each file response is sent at; 0 for no bound.")
	flag.Parse()
	opts.models = models
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, opts, os.Stdout, func(addr net.Addr) { fmt.Fprintln(os.Stderr, "hub: serving on", addr) })
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hub:", err)
		os.Exit(1)
	}
}
