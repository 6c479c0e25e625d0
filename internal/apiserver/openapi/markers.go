package openapi

import (
	"fmt"
	"strings"
)

//go:generate go run ./internal/markergen -o zz_generated_markers.go

// typeMarkers is what the comment markers of one Go struct type declare; reflection
// cannot see comments, so internal/markergen extracts them from the sources of the
// API types into markedType and enumValues.
type typeMarkers struct {
	mapType string                  // +structType / +mapType on the type: x-kubernetes-map-type
	fields  map[string]fieldMarkers // by JSON name
}

// fieldMarkers is what the comment markers of one struct field declare.
type fieldMarkers struct {
	optional, required bool     // +optional, +required: override the omitempty rule
	listType           string   // +listType
	listMapKeys        []string // +listMapKey
	mapType            string   // +mapType
	defaultJSON        string   // +default, as JSON
}

// describeEnum appends the list of values to a field's description in the form
// upstream's generator writes it. (Upstream also quotes each constant's comment;
// those are left out rather than copied into this repository.)
func describeEnum(description string, values []string) string {
	var b strings.Builder
	b.WriteString(description)
	b.WriteString("\n\nPossible enum values:")
	for _, v := range values {
		fmt.Fprintf(&b, "\n - `%q`", v)
	}
	return strings.TrimSpace(b.String())
}

// hasMarkerData reports whether markedType covers a Go package: for these the
// markers alone decide list types; other packages fall back to what their patch
// tags imply.
func hasMarkerData(pkgPath string) bool {
	return strings.HasPrefix(pkgPath, "k8s.io/api/") || pkgPath == "k8s.io/apimachinery/pkg/apis/meta/v1"
}
