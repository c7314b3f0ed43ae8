package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/embedops/embedops/internal/populate/hubtest"
)

// options are the command's flags.
type options struct {
	addr       string
	modelsFile string
	models     []string
	unit       int
	token      string
	// rateBytesPerSecond bounds how fast each file response is sent; 0
	// sends at full speed (meter).
	rateBytesPerSecond int
}

// modelSpecs are the models the options name: the file's, then the flags'.
func (o options) modelSpecs() ([]modelSpec, error) {
	var models []modelSpec
	if o.modelsFile != "" {
		s, err := readSpec(o.modelsFile)
		if err != nil {
			return nil, err
		}
		models = s.Models
	}
	for _, id := range o.models {
		models = append(models, modelSpec{ID: id, Repository: multiFormat, Unit: o.unit})
	}
	if len(models) == 0 {
		return nil, errors.New("no models: give -models or -model")
	}
	return models, nil
}

// run serves the hub until ctx ends, printing each commit as a JSON line on
// out, then calling ready with the address it listens on.
func run(ctx context.Context, opts options, out io.Writer, ready func(net.Addr)) error {
	models, err := opts.modelSpecs()
	if err != nil {
		return err
	}
	if opts.rateBytesPerSecond < 0 {
		return errors.New("the rate must not be negative")
	}
	hub := hubtest.NewHandler()
	defer hub.Close()
	if opts.token != "" {
		hub.RequireToken(opts.token)
	}
	commits, err := addModels(hub, models)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	for _, c := range commits {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	server := &http.Server{Handler: newMeter(hub, opts.rateBytesPerSecond), ReadHeaderTimeout: time.Minute}
	failed := make(chan error, 1)
	go func() { failed <- server.Serve(l) }()
	if ready != nil {
		ready(l.Addr())
	}
	select {
	case <-ctx.Done():
	case err := <-failed:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return server.Shutdown(shutdown)
}
