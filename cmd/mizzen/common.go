package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"mizzen/internal/apiserver/openapi"
	"mizzen/internal/flightrecorder"
	"mizzen/internal/gcpace"
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

// manageMemory is returnIdleMemory, and room for the collector while the process is
// busy (package gcpace), as the server's control plane has: for a component whose
// heap is small while it allocates fast, as the controller-manager's is when a load
// begins (at GOGC=100 it collected every 0.2 s while its live heap grew from 13 MB).
func manageMemory(ctx context.Context, verbose bool) {
	returnIdleMemory(ctx, verbose)
	go gcpace.Run(ctx, newLogger(verbose))
}

// startFlightRecorder starts the flight recorder a --flight-recorder-window of window
// asks for and returns what serves it and what stops it; with window 0, neither.
func startFlightRecorder(window time.Duration) (http.Handler, func(), error) {
	if window <= 0 {
		return nil, func() {}, nil
	}
	r, err := flightrecorder.Start(window)
	if err != nil {
		return nil, nil, err
	}
	return r, r.Stop, nil
}

// flightRecorderUsage is the --flight-recorder-window flag's help.
const flightRecorderUsage = "keep the last this long (e.g. 20s) of the process's Go execution trace in memory and serve it at " +
	flightrecorder.Path + " beside the profiles, to find what led to a stall; costs a few percent of the CPU and the window's memory (tens of MB); off when 0"
