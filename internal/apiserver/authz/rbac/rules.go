package rbac

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"mizzen/internal/apiserver/authz"
)

// RuleAllows reports whether one policy rule grants the request, with upstream's
// matching: "*" for any verb, group or resource; "*/sub" for a subresource of any
// resource; resourceNames limiting a rule to named objects (so never to list or
// create); non-resource URLs equal or, ending in "*", as a prefix.
func RuleAllows(a authz.Attributes, rule *rbacv1.PolicyRule) bool {
	if !hasOrStar(rule.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		return nonResourceURLMatches(rule.NonResourceURLs, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	return hasOrStar(rule.APIGroups, a.Group) &&
		resourceMatches(rule.Resources, resource, a.Subresource) &&
		resourceNameMatches(rule.ResourceNames, a.Name)
}

func hasOrStar(list []string, want string) bool {
	for _, x := range list {
		if x == rbacv1.VerbAll || x == want {
			return true
		}
	}
	return false
}

func resourceMatches(ruleResources []string, resource, subresource string) bool {
	for _, r := range ruleResources {
		switch {
		case r == rbacv1.ResourceAll, r == resource:
			return true
		case subresource != "" && r == "*/"+subresource:
			return true
		}
	}
	return false
}

func resourceNameMatches(names []string, name string) bool {
	return len(names) == 0 || slices.Contains(names, name)
}

func nonResourceURLMatches(urls []string, path string) bool {
	for _, u := range urls {
		switch {
		case u == rbacv1.NonResourceAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimSuffix(u, "*")):
			return true
		}
	}
	return false
}

// Covers reports whether the owner's rules grant everything the servant rules do, and
// lists the servant's rules that are not covered, broken down into single verbs,
// groups and resources, merged per resource and sorted as upstream shows them.
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var missing []rbacv1.PolicyRule
	for _, rule := range servant {
		for _, atom := range breakdown(rule) {
			if !coveredByAny(owner, atom) {
				missing = append(missing, atom)
			}
		}
	}
	return len(missing) == 0, compact(missing)
}

// breakdown splits a rule into rules of one verb, and one group, resource and name or
// one non-resource URL each.
func breakdown(rule rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, verb := range rule.Verbs {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				if len(rule.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource}})
					continue
				}
				for _, name := range rule.ResourceNames {
					out = append(out, rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource}, ResourceNames: []string{name}})
				}
			}
		}
		for _, url := range rule.NonResourceURLs {
			out = append(out, rbacv1.PolicyRule{Verbs: []string{verb}, NonResourceURLs: []string{url}})
		}
	}
	return out
}

// coveredByAny reports whether some owner rule grants the single-valued rule atom.
func coveredByAny(owner []rbacv1.PolicyRule, atom rbacv1.PolicyRule) bool {
	for i := range owner {
		if covers(&owner[i], atom) {
			return true
		}
	}
	return false
}

func covers(owner *rbacv1.PolicyRule, atom rbacv1.PolicyRule) bool {
	if !hasOrStar(owner.Verbs, atom.Verbs[0]) {
		return false
	}
	if len(atom.NonResourceURLs) > 0 {
		return nonResourceURLMatches(owner.NonResourceURLs, atom.NonResourceURLs[0])
	}
	if !hasOrStar(owner.APIGroups, atom.APIGroups[0]) {
		return false
	}
	resource := atom.Resources[0]
	subresource := ""
	if _, sub, ok := strings.Cut(resource, "/"); ok {
		subresource = sub
	}
	if !resourceMatches(owner.Resources, resource, subresource) {
		return false
	}
	if len(owner.ResourceNames) == 0 {
		return true
	}
	return len(atom.ResourceNames) == 1 && slices.Contains(owner.ResourceNames, atom.ResourceNames[0])
}

// compact merges single-verb rules that differ only in their verb, and sorts them.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name, url string }
	merged := map[key]*rbacv1.PolicyRule{}
	var order []key
	for _, r := range rules {
		k := key{}
		if len(r.NonResourceURLs) > 0 {
			k.url = r.NonResourceURLs[0]
		} else {
			k.group, k.resource = r.APIGroups[0], r.Resources[0]
			if len(r.ResourceNames) > 0 {
				k.name = r.ResourceNames[0]
			}
		}
		if m, ok := merged[k]; ok {
			if !slices.Contains(m.Verbs, r.Verbs[0]) {
				m.Verbs = append(m.Verbs, r.Verbs[0])
			}
			continue
		}
		r := r
		r.Verbs = slices.Clone(r.Verbs)
		merged[k] = &r
		order = append(order, k)
	}
	out := make([]rbacv1.PolicyRule, 0, len(order))
	for _, k := range order {
		out = append(out, *merged[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return CompactString(out[i]) < CompactString(out[j]) })
	return out
}

// CompactString shows a rule as upstream's escalation errors do:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["create"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, values []string) {
		if len(values) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, values))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
