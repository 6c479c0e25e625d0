package flowcontrol

import (
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"mizzen/internal/registry"
)

// Request is what classification reads of a request: who sent it and what it names.
type Request struct {
	User registry.User
	// ResourceRequest: Verb, APIGroup, Resource, Subresource and Namespace describe
	// it (the verb as authorization sees it: get, list, create, ...); otherwise Path
	// and Verb (the HTTP method in lower case) do.
	ResourceRequest bool
	Verb            string
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Path            string
	// APIVersion and Name are not classified by; the request dump shows them.
	APIVersion string
	Name       string
	// Seats is the work the request is estimated at (ListSeats for a list); 0 is one
	// seat. Its level caps it.
	Seats int
	// LongRunning requests (watches, exec, logs, proxies) are classified but take no
	// seat, which they would hold for as long as they last; except a watch, which
	// holds its seats until it has sent its initial events (watchinit.go).
	LongRunning bool
	// IndexedWatch: a watch selecting one value of the field the watch cache indexes
	// its resource's watchers by (pods' spec.nodeName). A change wakes only the
	// watchers of its own value, so the mutations' estimate does not count it.
	IndexedWatch bool
}

// schemaMatches reports whether any of the schema's rules matches the request, as
// upstream matches them: a subject, then a resource or non-resource rule.
func schemaMatches(rules []flowcontrolv1.PolicyRulesWithSubjects, r *Request) bool {
	for i := range rules {
		rule := &rules[i]
		if !anySubject(rule.Subjects, &r.User) {
			continue
		}
		if r.ResourceRequest {
			for j := range rule.ResourceRules {
				if resourceRuleMatches(&rule.ResourceRules[j], r) {
					return true
				}
			}
			continue
		}
		for j := range rule.NonResourceRules {
			nr := &rule.NonResourceRules[j]
			if contains(nr.Verbs, r.Verb, flowcontrolv1.VerbAll) && nonResourceURLMatches(nr.NonResourceURLs, r.Path) {
				return true
			}
		}
	}
	return false
}

func anySubject(subjects []flowcontrolv1.Subject, u *registry.User) bool {
	for i := range subjects {
		if subjectMatches(&subjects[i], u) {
			return true
		}
	}
	return false
}

func subjectMatches(s *flowcontrolv1.Subject, u *registry.User) bool {
	switch s.Kind {
	case flowcontrolv1.SubjectKindUser:
		return s.User != nil && (s.User.Name == flowcontrolv1.NameAll || s.User.Name == u.Name)
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			return false
		}
		if s.Group.Name == flowcontrolv1.NameAll {
			return true
		}
		for _, g := range u.Groups {
			if g == s.Group.Name {
				return true
			}
		}
		return false
	case flowcontrolv1.SubjectKindServiceAccount:
		if s.ServiceAccount == nil {
			return false
		}
		// "system:serviceaccount:<namespace>:<name>", read without building it.
		rest, ok := strings.CutPrefix(u.Name, "system:serviceaccount:")
		if !ok {
			return false
		}
		if rest, ok = strings.CutPrefix(rest, s.ServiceAccount.Namespace); !ok {
			return false
		}
		if rest, ok = strings.CutPrefix(rest, ":"); !ok {
			return false
		}
		return s.ServiceAccount.Name == flowcontrolv1.NameAll || rest == s.ServiceAccount.Name
	}
	return false
}

func resourceRuleMatches(rule *flowcontrolv1.ResourcePolicyRule, r *Request) bool {
	if !contains(rule.Verbs, r.Verb, flowcontrolv1.VerbAll) ||
		!containsResource(rule.Resources, r.Resource, r.Subresource) ||
		!contains(rule.APIGroups, r.APIGroup, flowcontrolv1.APIGroupAll) {
		return false
	}
	if r.Namespace == "" {
		// Cluster-scoped objects, and namespaced ones across every namespace.
		return rule.ClusterScope
	}
	return contains(rule.Namespaces, r.Namespace, flowcontrolv1.NamespaceEvery)
}

// nonResourceURLMatches: a URL listed, "*", or a listed prefix ("/healthz" and
// "/healthz/*" both cover "/healthz/etcd").
func nonResourceURLMatches(urls []string, path string) bool {
	for _, u := range urls {
		if u == flowcontrolv1.NonResourceAll || u == path {
			return true
		}
		prefix := strings.TrimSuffix(u, "*")
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// contains: the list is the wildcard alone, or holds x.
func contains(list []string, x, wildcard string) bool {
	if len(list) == 1 && list[0] == wildcard {
		return true
	}
	for _, y := range list {
		if y == x {
			return true
		}
	}
	return false
}

// containsResource: the list is "*" alone, or holds "resource" or, with a
// subresource, "resource/subresource" (compared without joining them: a kubelet's
// every status write is checked against several schemas).
func containsResource(list []string, resource, sub string) bool {
	if len(list) == 1 && list[0] == flowcontrolv1.ResourceAll {
		return true
	}
	for _, y := range list {
		if sub == "" {
			if y == resource {
				return true
			}
			continue
		}
		if len(y) == len(resource)+1+len(sub) && y[:len(resource)] == resource && y[len(resource)] == '/' && y[len(resource)+1:] == sub {
			return true
		}
	}
	return false
}

// distinguisher is the part of the flow key the schema's method takes from the
// request: the user's name, the namespace, or nothing.
func distinguisher(method flowcontrolv1.FlowDistinguisherMethodType, r *Request) string {
	switch method {
	case flowcontrolv1.FlowDistinguisherMethodByUserType:
		return r.User.Name
	case flowcontrolv1.FlowDistinguisherMethodByNamespaceType:
		return r.Namespace
	}
	return ""
}
