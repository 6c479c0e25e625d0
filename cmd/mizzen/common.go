package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"mizzen/internal/apiserver/openapi"
	"mizzen/internal/idlemem"
	"mizzen/internal/registry"
)

// newLogger returns the structured logger every component writes to stderr.
func newLogger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// openAPIHandler builds the OpenAPI documents for the served resources; custom
// resources are added to them while the server runs.
func openAPIHandler(resources []*registry.Resource) (http.Handler, error) {
	return openapi.NewDynamic(resources)
}

// returnIdleMemory gives back, while ctx lasts, the heap a burst freed and, at the
// first quiet moment, the executable's pages start-up faulted in (package idlemem):
// for a component that runs as its own long-lived process. The server's control
// plane does it itself once the apiserver is ready (core.Options.ReturnIdleMemory).
func returnIdleMemory(ctx context.Context, verbose bool) {
	go idlemem.Run(ctx, newLogger(verbose))
}
