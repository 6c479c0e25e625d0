package delegatedauth

import (
	"context"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Upstream's delegated authorization defaults: answers cached 10s whether allowed or
// denied, health paths open to anyone, system:masters allowed without asking (the
// apiserver allows it everything anyway).
const (
	DefaultAllowCacheTTL = 10 * time.Second
	DefaultDenyCacheTTL  = 10 * time.Second
)

// DefaultAlwaysAllowPaths are upstream's --authorization-always-allow-paths.
var DefaultAlwaysAllowPaths = []string{"/healthz", "/readyz", "/livez"}

// DefaultAlwaysAllowGroups are the groups upstream allows without a review.
var DefaultAlwaysAllowGroups = []string{"system:masters"}

// Authorizer decides requests by a SubjectAccessReview, caching the answers:
// non-resource requests (a verb on a path) and, for servers that guard their
// endpoints as an API resource (the kubelet's nodes/<subresource>), resource ones.
type Authorizer struct {
	client authorizationclient.SubjectAccessReviewInterface
	// AlwaysAllowPaths are allowed to anyone: a path matches exactly, or by prefix
	// when it ends in "*", as upstream's.
	AlwaysAllowPaths  []string
	AlwaysAllowGroups []string
	AllowTTL, DenyTTL time.Duration
	cache             *ttlCache[string, Decision]
}

// Decision is an authorization's answer; Reason is the apiserver's, when it gave one.
type Decision struct {
	Allowed bool
	Reason  string
}

// NewAuthorizer asks through client, with upstream's defaults.
func NewAuthorizer(client authorizationclient.SubjectAccessReviewInterface) *Authorizer {
	return &Authorizer{
		client:            client,
		AlwaysAllowPaths:  DefaultAlwaysAllowPaths,
		AlwaysAllowGroups: DefaultAlwaysAllowGroups,
		AllowTTL:          DefaultAllowCacheTTL,
		DenyTTL:           DefaultDenyCacheTTL,
		cache:             newTTLCache[string, Decision](),
	}
}

// Authorize decides whether u may use verb on path; an error is a review that could
// not be made (not cached).
func (a *Authorizer) Authorize(ctx context.Context, u *User, verb, path string) (Decision, error) {
	if a.alwaysAllowed(path) {
		return Decision{Allowed: true}, nil
	}
	return a.review(ctx, u, authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	})
}

// AuthorizeResource decides whether u may make a request of an API resource (e.g.
// get on nodes/metrics named as a node), as servers that guard their endpoints by
// resource attributes ask; AlwaysAllowPaths do not apply.
func (a *Authorizer) AuthorizeResource(ctx context.Context, u *User, attrs authorizationv1.ResourceAttributes) (Decision, error) {
	return a.review(ctx, u, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &attrs})
}

// review asks the apiserver spec's question for u, unless u is in an always-allowed
// group or the answer is cached.
func (a *Authorizer) review(ctx context.Context, u *User, spec authorizationv1.SubjectAccessReviewSpec) (Decision, error) {
	for _, g := range u.Groups {
		if slices.Contains(a.AlwaysAllowGroups, g) {
			return Decision{Allowed: true}, nil
		}
	}
	spec.User, spec.UID, spec.Groups = u.Name, u.UID, u.Groups
	if len(u.Extra) > 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			spec.Extra[k] = v
		}
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: spec}
	key := reviewKey(sar.Spec)
	if d, ok := a.cache.get(key); ok {
		return d, nil
	}
	got, err := a.client.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Allowed: got.Status.Allowed && !got.Status.Denied, Reason: got.Status.Reason}
	ttl := a.DenyTTL
	if d.Allowed {
		ttl = a.AllowTTL
	}
	a.cache.put(key, d, ttl)
	return d, nil
}

func (a *Authorizer) alwaysAllowed(path string) bool {
	for _, p := range a.AlwaysAllowPaths {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(path, prefix) {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// reviewKey identifies a review's question: every field of the spec, in an order
// that does not depend on the map's.
func reviewKey(s authorizationv1.SubjectAccessReviewSpec) string {
	var b strings.Builder
	field := func(v string) { b.WriteString(v); b.WriteByte(0) }
	field(s.User)
	field(s.UID)
	for _, g := range s.Groups {
		field(g)
	}
	b.WriteByte(1)
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field(k)
		for _, v := range s.Extra[k] {
			field(v)
		}
		b.WriteByte(1)
	}
	if n := s.NonResourceAttributes; n != nil {
		field("nonresource")
		field(n.Verb)
		field(n.Path)
	}
	if r := s.ResourceAttributes; r != nil {
		field("resource")
		for _, v := range []string{r.Namespace, r.Verb, r.Group, r.Version, r.Resource, r.Subresource, r.Name} {
			field(v)
		}
	}
	return b.String()
}
