package authz

import (
	"context"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"mizzen/internal/registry"
)

// Union allows a request when any of its authorizers does, asked in order, as
// upstream's union of authorization modes; a refusal carries the reasons the members
// gave, joined. A new authorizer plugs in as one more member.
type Union []Authorizer

// Authorize implements Authorizer.
func (u Union) Authorize(ctx context.Context, a Attributes) (bool, string) {
	var reasons []string
	for _, member := range u {
		ok, reason := member.Authorize(ctx, a)
		if ok {
			return true, reason
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	return false, strings.Join(reasons, "; ")
}

// RulesFor lists the rules of every member that can list them.
func (u Union) RulesFor(user registry.User, namespace string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, member := range u {
		if r, ok := member.(RuleResolver); ok {
			rules = append(rules, r.RulesFor(user, namespace)...)
		}
	}
	return rules
}

// members are the authorizers a is made of: the members of a union, nested unions
// included, or a itself.
func members(a Authorizer) []Authorizer {
	u, ok := a.(Union)
	if !ok {
		if a == nil {
			return nil
		}
		return []Authorizer{a}
	}
	var out []Authorizer
	for _, m := range u {
		out = append(out, members(m)...)
	}
	return out
}

// Followers are the authorizers within a that follow stored objects, for the server
// to feed.
func Followers(a Authorizer) []Follower {
	var out []Follower
	for _, m := range members(a) {
		if f, ok := m.(Follower); ok {
			out = append(out, f)
		}
	}
	return out
}

// Find returns the first authorizer of type T within a (a itself or a union's member).
func Find[T Authorizer](a Authorizer) (T, bool) {
	for _, m := range members(a) {
		if t, ok := m.(T); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}
