package authn

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

const (
	impersonateUserHeader        = "Impersonate-User"
	impersonateUIDHeader         = "Impersonate-Uid"
	impersonateGroupHeader       = "Impersonate-Group"
	impersonateExtraHeaderPrefix = "Impersonate-Extra-"
	serviceAccountUserPrefix     = "system:serviceaccount:"
)

// Authorize refuses a request the authorizer does not allow, with the error the client
// gets (see authz.Authorize).
type Authorize func(ctx context.Context, a authz.Attributes) error

// WithImpersonation applies the Impersonate-* headers to the authenticated user in the
// request's context (see Impersonate), checking each with authorize.
func WithImpersonation(next http.Handler, authorize Authorize, fail ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requester, _ := registry.UserFrom(r.Context())
		user, impersonated, err := Impersonate(r.Context(), requester, r, authorize)
		if err != nil {
			if apierrors.IsForbidden(err) {
				authz.MarkRefusal(w)
			}
			fail(w, r, err)
			return
		}
		if impersonated {
			r = r.WithContext(registry.WithUser(r.Context(), user))
		}
		next.ServeHTTP(w, r)
	})
}

// Impersonate applies the Impersonate-* headers (kubectl --as, --as-group,
// --as-uid): the request goes on as the named user, when the requester may
// impersonate the user (or service account), each group, extra value and UID, as
// upstream checks with the impersonate verb. Without those headers the user is
// returned unchanged, and impersonated is false.
func Impersonate(ctx context.Context, requester registry.User, r *http.Request, authorize Authorize) (user registry.User, impersonated bool, err error) {
	name := r.Header.Get(impersonateUserHeader)
	groups := r.Header.Values(impersonateGroupHeader)
	uid := r.Header.Get(impersonateUIDHeader)
	var extra map[string][]string // made at the first extra header (most requests have none)
	for h, values := range r.Header {
		if !strings.HasPrefix(h, impersonateExtraHeaderPrefix) {
			continue
		}
		key, err := url.PathUnescape(strings.ToLower(strings.TrimPrefix(h, impersonateExtraHeaderPrefix)))
		if err != nil {
			return requester, false, apierrors.NewBadRequest(fmt.Sprintf("malformed extra key for impersonation request: %v", err))
		}
		if extra == nil {
			extra = map[string][]string{}
		}
		extra[key] = append(extra[key], values...)
	}
	if name == "" {
		var without []string
		if len(groups) > 0 {
			without = append(without, impersonateGroupHeader)
		}
		if len(extra) > 0 {
			without = append(without, impersonateExtraHeaderPrefix+"*")
		}
		if uid != "" {
			without = append(without, impersonateUIDHeader)
		}
		if len(without) > 0 {
			return requester, false, apierrors.NewBadRequest(fmt.Sprintf("requested %v without impersonating a user", without))
		}
		return requester, false, nil
	}
	check := func(a authz.Attributes) error {
		a.User, a.Verb, a.ResourceRequest = requester, "impersonate", true
		return authorize(ctx, a)
	}
	user = registry.User{Name: name, UID: uid}
	if rest, ok := strings.CutPrefix(name, serviceAccountUserPrefix); ok && strings.Count(rest, ":") == 1 {
		ns, sa, _ := strings.Cut(rest, ":")
		if err := check(authz.Attributes{Resource: "serviceaccounts", Namespace: ns, Name: sa}); err != nil {
			return requester, false, err
		}
		user.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
	} else if err := check(authz.Attributes{Resource: "users", Name: name}); err != nil {
		return requester, false, err
	}
	for _, g := range groups {
		if err := check(authz.Attributes{Resource: "groups", Name: g}); err != nil {
			return requester, false, err
		}
		user.Groups = append(user.Groups, g)
	}
	for key, values := range extra {
		for _, v := range values {
			if err := check(authz.Attributes{Group: "authentication.k8s.io", Resource: "userextras", Subresource: key, Name: v}); err != nil {
				return requester, false, err
			}
		}
	}
	if len(extra) > 0 {
		user.Extra = extra
	}
	if uid != "" {
		if err := check(authz.Attributes{Group: "authentication.k8s.io", Resource: "uids", Name: uid}); err != nil {
			return requester, false, err
		}
	}
	if name != AnonymousUser && !slices.Contains(user.Groups, AuthenticatedGroup) {
		user.Groups = append(user.Groups, AuthenticatedGroup)
	}
	for h := range r.Header {
		if strings.HasPrefix(h, "Impersonate-") {
			r.Header.Del(h)
		}
	}
	return user, true, nil
}
