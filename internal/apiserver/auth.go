package apiserver

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// Attributes describe a request for authorization (see package authz).
type Attributes = authz.Attributes

// Authorizer decides whether a request may proceed (see package authz).
type Authorizer = authz.Authorizer

// authorizeResource refuses a request the configured authorizer does not allow, with
// upstream's message (see authz.Check).
func (s *Server) authorizeResource(ctx context.Context, a Attributes) error {
	return authz.Check(ctx, s.cfg.Authorizer, a)
}

// requestAttributes describe a request for the authorization filter: a resource
// request by what its path names, anything else (health, discovery, OpenAPI, OpenID,
// unknown paths) by its path, as upstream.
func (s *Server) requestAttributes(r *http.Request) Attributes {
	user, _ := registry.UserFrom(r.Context())
	info := requestInfoFrom(r.Context())
	if info == nil || info.Resource == "" {
		return Attributes{User: user, Verb: authz.NonResourceVerb(r.Method), Path: r.URL.Path}
	}
	name := info.Name
	if name == "" && (info.Verb == "list" || info.Verb == "watch") {
		name = selectedName(r)
	}
	return Attributes{User: user, Verb: info.Verb, ResourceRequest: true, Group: info.Group,
		Version: info.Version, Resource: info.Resource, Subresource: info.Subresource, Namespace: info.Namespace, Name: name}
}

// selectedName is the single object a list or watch selects with
// fieldSelector=metadata.name=NAME, which upstream's apiserver authorizes as a request
// naming that object (so that a kubelet may watch the one ConfigMap its pod uses, and
// RBAC's resourceNames apply); "" for any other selector or a name that could not be a
// path segment.
func selectedName(r *http.Request) string {
	name := selectedField(r, "metadata.name")
	if len(path.IsValidPathSegmentName(name)) > 0 {
		return ""
	}
	return name
}

// selectedField is the one value a request's field selector requires of the field,
// "" if it requires none.
func selectedField(r *http.Request, field string) string {
	raw := r.URL.Query().Get("fieldSelector")
	if raw == "" {
		return ""
	}
	sel, err := fields.ParseSelector(raw)
	if err != nil {
		return ""
	}
	value, _ := sel.RequiresExactMatch(field)
	return value
}
