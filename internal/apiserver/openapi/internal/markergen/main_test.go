package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedFileIsCurrent fails when the API sources the module requires have
// markers the committed table lacks (e.g. after a k8s.io/api upgrade): run
// go generate ./internal/apiserver/openapi.
func TestGeneratedFileIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the API sources")
	}
	want, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../zz_generated_markers.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("zz_generated_markers.go is stale: run go generate ./internal/apiserver/openapi")
	}
}
