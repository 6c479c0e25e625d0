package apiserver

import (
	"context"
	"net/http"

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
	return Attributes{User: user, Verb: info.Verb, ResourceRequest: true, Group: info.Group,
		Version: info.Version, Resource: info.Resource, Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name}
}
