// Package authz defines what the apiserver asks an authorizer about a request, and
// what an authorizer answers, so that authorizers (RBAC, AlwaysAllow) live in packages
// of their own without importing the apiserver.
package authz

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/registry"
)

// Attributes describe a request for authorization, as upstream's authorizers see it:
// a resource request (verb on group/resource/subresource, in a namespace, by name) or a
// non-resource request (verb on a URL path).
type Attributes struct {
	User registry.User
	// Verb is the API verb of a resource request (get, list, watch, create, update,
	// patch, delete, deletecollection, or a special verb such as impersonate, bind,
	// escalate); for a non-resource request, the lower-case HTTP verb mapped as
	// upstream does (get, create for POST, update for PUT, patch, delete).
	Verb string
	// ResourceRequest tells the two kinds apart.
	ResourceRequest bool
	Group           string
	Version         string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	// Path is the URL path of a non-resource request.
	Path string
}

// Authorizer decides whether a request may proceed. The reason says why: shown to a
// refused client, and in access reviews.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string)
}

// RuleResolver lists the rules a user holds in a namespace (cluster-wide rules
// included; "" for the cluster scope only). SelfSubjectRulesReview and the RBAC
// escalation check use it.
type RuleResolver interface {
	RulesFor(user registry.User, namespace string) []rbacv1.PolicyRule
}

// AlwaysAllow lets every request through (--authorization-mode=AlwaysAllow).
type AlwaysAllow struct{}

// Authorize allows.
func (AlwaysAllow) Authorize(context.Context, Attributes) (bool, string) { return true, "" }

// RulesFor holds every permission.
func (AlwaysAllow) RulesFor(registry.User, string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
	}
}

// Masters is the group whose members are always allowed, whatever the policy says, as
// upstream's apiserver short-circuits it.
const Masters = "system:masters"

// IsMaster reports whether the user is in the system:masters group.
func IsMaster(u registry.User) bool {
	for _, g := range u.Groups {
		if g == Masters {
			return true
		}
	}
	return false
}

// Follower is an authorizer that keeps its own view of stored objects (RBAC's roles
// and bindings). The apiserver feeds it from its watch cache: the full list of each
// resource through Replace, then every change through Apply; after a lost watch,
// Replace again.
type Follower interface {
	Resources() []schema.GroupResource
	Replace(gr schema.GroupResource, objs []runtime.Object)
	Apply(obj runtime.Object, deleted bool)
}

// A FieldSifter is a Follower that can tell from an object's selectable fields alone
// (those its resource offers to field selectors, which the watch cache keeps beside
// each object) that the object is nothing to it, however it changed: the feed then
// leaves it out without decoding it. The Node authorizer needs no pod without a node,
// which is every pod as it is created.
type FieldSifter interface {
	Follower
	// Ignores reports whether an object of gr with these selectable fields (as the
	// cache keeps them: a field it does not keep is not there) is nothing to the
	// follower, in a list, an addition, a change or a deletion.
	Ignores(gr schema.GroupResource, selectable fields.Fields) bool
}
