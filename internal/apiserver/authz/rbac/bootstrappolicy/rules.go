package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// ruleBuilder writes policy rules compactly: rule("get", "list").groups("").resources("pods").
type ruleBuilder struct{ r rbacv1.PolicyRule }

func rule(verbs ...string) *ruleBuilder { return &ruleBuilder{r: rbacv1.PolicyRule{Verbs: verbs}} }

func (b *ruleBuilder) groups(groups ...string) *ruleBuilder {
	b.r.APIGroups = append(b.r.APIGroups, groups...)
	return b
}

func (b *ruleBuilder) resources(resources ...string) *ruleBuilder {
	b.r.Resources = append(b.r.Resources, resources...)
	return b
}

func (b *ruleBuilder) names(names ...string) *ruleBuilder {
	b.r.ResourceNames = append(b.r.ResourceNames, names...)
	return b
}

func (b *ruleBuilder) urls(urls ...string) *ruleBuilder {
	b.r.NonResourceURLs = append(b.r.NonResourceURLs, urls...)
	return b
}

func (b *ruleBuilder) rule() rbacv1.PolicyRule { return b.r }

func rules(bs ...*ruleBuilder) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(bs))
	for i, b := range bs {
		out[i] = b.rule()
	}
	return out
}

const (
	legacyGroup       = ""
	metricsGroup      = "metrics.k8s.io"
	appsGroup         = "apps"
	autoscalingGroup  = "autoscaling"
	batchGroup        = "batch"
	certificatesGroup = "certificates.k8s.io"
	coordinationGroup = "coordination.k8s.io"
	discoveryGroup    = "discovery.k8s.io"
	eventsGroup       = "events.k8s.io"
	extensionsGroup   = "extensions"
	networkingGroup   = "networking.k8s.io"
	nodeGroup         = "node.k8s.io"
	policyGroup       = "policy"
	rbacGroup         = "rbac.authorization.k8s.io"
	schedulingGroup   = "scheduling.k8s.io"
	storageGroup      = "storage.k8s.io"
	authnGroup        = "authentication.k8s.io"
	authzGroup        = "authorization.k8s.io"

	admissionRegistrationGroup = "admissionregistration.k8s.io"
	resourceGroup              = "resource.k8s.io"
)

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}
)
