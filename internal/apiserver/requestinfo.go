package apiserver

import (
	"net/http"
	"strings"
)

// requestInfo is what a resource request's path and method say, parsed as upstream's
// apiserver parses them.
type requestInfo struct {
	Verb        string // get, list, watch, create, update, patch, delete, deletecollection
	Group       string
	Version     string
	Namespace   string
	Resource    string
	Name        string
	Subresource string
	// Rest is what follows the subresource (the path of pods/proxy, nodes/proxy).
	Rest string
}

// namespaceSubresources are subresources of a namespace object itself, not resources in
// the namespace.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parseRequestInfo returns nil when the path is not a resource request (discovery,
// health, OpenAPI, ...).
func parseRequestInfo(r *http.Request) *requestInfo {
	parts := splitPath(r.URL.Path)
	info := &requestInfo{}
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		info.Version = parts[1]
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.Group, info.Version = parts[1], parts[2]
		parts = parts[3:]
	default:
		return nil
	}
	watchPrefix := false
	if parts[0] == "watch" {
		watchPrefix = true
		parts = parts[1:]
		if len(parts) == 0 {
			return nil
		}
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		info.Namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		}
	}
	info.Resource = parts[0]
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = parts[2]
	}
	if len(parts) > 3 {
		info.Rest = strings.Join(parts[3:], "/")
	}
	if info.Resource == "namespaces" {
		// /api/v1/namespaces/foo is the namespace foo, not a list in namespace foo.
		info.Namespace = ""
	}
	q := r.URL.Query()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case info.Name == "" && (watchPrefix || isTrue(q.Get("watch"))):
			info.Verb = "watch"
		case info.Name == "":
			info.Verb = "list"
		case watchPrefix:
			info.Verb = "watch"
		default:
			info.Verb = "get"
		}
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		info.Verb = "delete"
		if info.Name == "" {
			info.Verb = "deletecollection"
		}
	default:
		info.Verb = strings.ToLower(r.Method)
	}
	return info
}

func isTrue(s string) bool { return s == "true" || s == "1" }

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
