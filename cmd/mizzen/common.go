package main

import (
	"log/slog"
	"net/http"
	"os"

	"mizzen/internal/apiserver/openapi"
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
