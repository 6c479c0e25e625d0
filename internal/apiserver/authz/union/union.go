// Package union chains authorizers as --authorization-mode=Node,RBAC does: the first
// that allows a request lets it through; a refusal carries every reason given. It is
// a Follower over the followers it chains, and answers rules reviews with the first
// RuleResolver's rules.
package union

import (
	"context"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// Union is a chain of authorizers.
type Union []authz.Authorizer

var (
	_ authz.Follower     = Union{}
	_ authz.RuleResolver = Union{}
)

// Authorize asks each authorizer in turn.
func (u Union) Authorize(ctx context.Context, a authz.Attributes) (bool, string) {
	var reasons []string
	for _, z := range u {
		ok, reason := z.Authorize(ctx, a)
		if ok {
			return true, reason
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return false, strings.Join(reasons, ", ")
}

// Resources are every follower's.
func (u Union) Resources() []schema.GroupResource {
	var out []schema.GroupResource
	for _, z := range u {
		if f, ok := z.(authz.Follower); ok {
			out = append(out, f.Resources()...)
		}
	}
	return out
}

// Replace goes to the followers of gr.
func (u Union) Replace(gr schema.GroupResource, objs []runtime.Object) {
	for _, z := range u {
		if f, ok := z.(authz.Follower); ok && slices.Contains(f.Resources(), gr) {
			f.Replace(gr, objs)
		}
	}
}

// Apply goes to every follower; each takes the kinds it follows.
func (u Union) Apply(obj runtime.Object, deleted bool) {
	for _, z := range u {
		if f, ok := z.(authz.Follower); ok {
			f.Apply(obj, deleted)
		}
	}
}

// RulesFor are the first RuleResolver's rules.
func (u Union) RulesFor(user registry.User, namespace string) []rbacv1.PolicyRule {
	for _, z := range u {
		if r, ok := z.(authz.RuleResolver); ok {
			return r.RulesFor(user, namespace)
		}
	}
	return nil
}
