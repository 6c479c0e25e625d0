package authz

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrorWriter answers a request with an error, as the server answers any.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// WithAuthorization is the authorization step of the request chain: a request a does
// not allow is answered with upstream's 403 (with its X-Content-Type-Options: nosniff,
// as upstream's responsewriters.Forbidden) and goes no further. attributes describes
// a request (its user comes from the context authentication filled). A nil authorizer
// lets every authenticated request through.
func WithAuthorization(next http.Handler, a Authorizer, attributes func(*http.Request) Attributes, fail ErrorWriter) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := Check(r.Context(), a, attributes(r)); err != nil {
			MarkRefusal(w)
			fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// MarkRefusal sets the header upstream sends with every authorization refusal, so that
// a browser never reads the refusal's body as anything but its declared type.
func MarkRefusal(w http.ResponseWriter) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// Check asks a about a request and turns a refusal into the Forbidden error upstream
// answers: `User "x" cannot get resource "pods" in API group "" in the namespace "y"`
// for a resource request, `User "x" cannot get path "/foo"` for another. A nil
// authorizer allows.
func Check(ctx context.Context, a Authorizer, attrs Attributes) error {
	if a == nil {
		return nil
	}
	ok, reason := a.Authorize(ctx, attrs)
	if ok {
		return nil
	}
	if !attrs.ResourceRequest {
		msg := fmt.Sprintf("User %q cannot %s path %q", attrs.User.Name, attrs.Verb, attrs.Path)
		if reason != "" {
			msg += ": " + reason
		}
		return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("%s", msg))
	}
	resource := attrs.Resource
	if attrs.Subresource != "" {
		resource += "/" + attrs.Subresource
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q", attrs.User.Name, attrs.Verb, resource, attrs.Group)
	if attrs.Namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", attrs.Namespace)
	} else {
		msg += " at the cluster scope"
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: attrs.Group, Resource: resource}, attrs.Name, fmt.Errorf("%s", msg))
}

// NonResourceVerb is the verb of a non-resource request, as upstream maps methods.
func NonResourceVerb(method string) string {
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
