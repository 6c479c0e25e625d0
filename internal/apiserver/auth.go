package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// Attributes describe a request for authorization (see package authz).
type Attributes = authz.Attributes

// Authorizer decides whether a request may proceed (see package authz).
type Authorizer = authz.Authorizer

// authorize applies the configured authorizer to a resource request.
func (s *Server) authorize(ctx context.Context, user registry.User, info *requestInfo) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	return s.authorizeResource(ctx, Attributes{User: user, Verb: info.Verb, ResourceRequest: true, Group: info.Group,
		Version: info.Version, Resource: info.Resource, Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name})
}

// authorizeResource refuses a resource request the authorizer does not allow, with
// upstream's message.
func (s *Server) authorizeResource(ctx context.Context, a Attributes) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	ok, reason := s.cfg.Authorizer.Authorize(ctx, a)
	if ok {
		return nil
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q", a.User.Name, a.Verb, resource, a.Group)
	if a.Namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", a.Namespace)
	} else {
		msg += " at the cluster scope"
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.Group, Resource: resource}, a.Name, fmt.Errorf("%s", msg))
}

// authorizePath applies the configured authorizer to a non-resource request
// (discovery, OpenAPI, OpenID, ...); upstream's refusal reads
// `forbidden: User "x" cannot get path "/foo"`.
func (s *Server) authorizePath(ctx context.Context, user registry.User, r *http.Request) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	a := Attributes{User: user, Verb: nonResourceVerb(r.Method), Path: r.URL.Path}
	ok, reason := s.cfg.Authorizer.Authorize(ctx, a)
	if ok {
		return nil
	}
	msg := fmt.Sprintf("User %q cannot %s path %q", user.Name, a.Verb, a.Path)
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("%s", msg))
}

// nonResourceVerb is the verb of a non-resource request, as upstream maps methods.
func nonResourceVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}
