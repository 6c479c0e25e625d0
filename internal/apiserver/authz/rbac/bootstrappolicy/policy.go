// Package bootstrappolicy is the RBAC policy every cluster starts with, upstream's
// default ClusterRoles and ClusterRoleBindings (cluster-admin, admin/edit/view,
// system:discovery, system:node, system:kube-scheduler, ...), labelled
// kubernetes.io/bootstrapping=rbac-defaults, and the reconciliation that keeps them:
// at every apiserver start, missing rules and subjects are added back unless the
// object is annotated rbac.authorization.kubernetes.io/autoupdate=false.
//
// Where mizzen's components need more than upstream's roles grant, the rules are
// extended here, each with a comment saying why.
package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// BootstrapLabel marks the default policy objects.
	BootstrapLabel = "kubernetes.io/bootstrapping"
	bootstrapValue = "rbac-defaults"
	// AutoUpdateAnnotation set to "false" keeps an object from being reconciled.
	AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"

	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

func objectMeta(name string, extraLabels ...string) metav1.ObjectMeta {
	labels := map[string]string{BootstrapLabel: bootstrapValue}
	for _, l := range extraLabels {
		labels[l] = "true"
	}
	return metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{AutoUpdateAnnotation: "true"}}
}

func clusterRole(name string, r []rbacv1.PolicyRule, extraLabels ...string) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: objectMeta(name, extraLabels...), Rules: r}
}

func aggregatedClusterRole(name, selectorLabel string, extraLabels ...string) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		ObjectMeta: objectMeta(name, extraLabels...),
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{selectorLabel: "true"}},
		}},
	}
}

// ClusterRoles are the default cluster roles, in name order.
func ClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		aggregatedClusterRole("admin", aggregateToAdmin),
		clusterRole("cluster-admin", rules(
			rule("*").groups("*").resources("*"),
			rule("*").urls("*"),
		)),
		aggregatedClusterRole("edit", aggregateToEdit, aggregateToAdmin),
		clusterRole("system:aggregate-to-admin", rules(
			rule("create").groups(authzGroup).resources("localsubjectaccessreviews"),
			rule(append(readVerbs, writeVerbs...)...).groups(rbacGroup).resources("rolebindings", "roles"),
		), aggregateToAdmin),
		clusterRole("system:aggregate-to-edit", aggregateToEditRules(), aggregateToEdit),
		clusterRole("system:aggregate-to-view", aggregateToViewRules(), aggregateToView),
		clusterRole("system:auth-delegator", rules(
			rule("create").groups(authnGroup).resources("tokenreviews"),
			rule("create").groups(authzGroup).resources("subjectaccessreviews"),
		)),
		clusterRole("system:basic-user", rules(
			rule("create").groups(authzGroup).resources("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule("create").groups(authnGroup).resources("selfsubjectreviews"),
		)),
		clusterRole("system:discovery", rules(
			rule("get").urls("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"),
		)),
		clusterRole("system:kube-controller-manager", controllerManagerRules()),
		clusterRole("system:kube-dns", rules(
			rule("list", "watch").groups(legacyGroup).resources("endpoints", "services"),
		)),
		clusterRole("system:kube-scheduler", schedulerRules()),
		clusterRole("system:kubelet-api-admin", rules(
			rule(readVerbs...).groups(legacyGroup).resources("nodes"),
			rule("proxy").groups(legacyGroup).resources("nodes"),
			rule("*").groups(legacyGroup).resources("nodes/log", "nodes/metrics", "nodes/proxy", "nodes/stats"),
			rule("*").groups(legacyGroup).resources("nodes/pods", "nodes/healthz", "nodes/configz"),
		)),
		clusterRole("system:monitoring", rules(
			rule("get").urls("/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"),
		)),
		clusterRole("system:node", nodeRules()),
		clusterRole("system:node-bootstrapper", rules(
			rule("create", "get", "list", "watch").groups(certificatesGroup).resources("certificatesigningrequests"),
		)),
		clusterRole("system:node-proxier", rules(
			rule("list", "watch").groups(legacyGroup).resources("endpoints", "services"),
			rule(readVerbs...).groups(legacyGroup).resources("nodes"),
			rule("create", "patch", "update").groups(legacyGroup, eventsGroup).resources("events"),
			rule("list", "watch").groups(discoveryGroup).resources("endpointslices"),
		)),
		clusterRole("system:public-info-viewer", rules(
			rule("get").urls("/healthz", "/livez", "/readyz", "/version", "/version/"),
		)),
		// mizzen's own: the web UI's page and assets at the apiserver's /ui/ (the
		// dashboard, docs/dashboard.md). They hold no data, so who has not logged in yet
		// may load the page that asks for a token; every API call the page makes is
		// authorized as its user.
		clusterRole(UIRole, rules(
			rule("get").urls("/ui", "/ui/*"),
		)),
		clusterRole("system:service-account-issuer-discovery", rules(
			rule("get").urls("/.well-known/openid-configuration", "/openid/v1/jwks"),
		)),
		clusterRole("system:volume-scheduler", rules(
			rule("get", "list", "patch", "update", "watch").groups(legacyGroup).resources("persistentvolumes"),
			rule(readVerbs...).groups(storageGroup).resources("storageclasses"),
			rule("get", "list", "patch", "update", "watch").groups(legacyGroup).resources("persistentvolumeclaims"),
		)),
		aggregatedClusterRole("view", aggregateToView, aggregateToEdit),
	}
}

// AddonClusterRoles are the roles of the add-ons mizzen bundles, which upstream's
// bootstrap policy does not hold but their own manifests create: kubeadm's CoreDNS
// role, and the metrics server's. Deviation: they are kept like the defaults, since
// `mizzen server` runs these add-ons itself.
func AddonClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		clusterRole("system:aggregated-metrics-reader", rules(
			rule(readVerbs...).groups(metricsGroup).resources("pods", "nodes"),
		), aggregateToView, aggregateToEdit, aggregateToAdmin),
		clusterRole("system:coredns", rules(
			rule("list", "watch").groups(legacyGroup).resources("endpoints", "services", "pods", "namespaces"),
			rule("list", "watch").groups(discoveryGroup).resources("endpointslices"),
		)),
		// Deviation: also nodes/stats (as the metrics server's manifests did before
		// v0.6), since mizzen's reads the kubelets' /stats/summary.
		clusterRole("system:metrics-server", rules(
			rule("get").groups(legacyGroup).resources("nodes/metrics", "nodes/stats"),
			rule(readVerbs...).groups(legacyGroup).resources("pods", "nodes"),
		)),
		// As the ClusterRole of upstream's cloud-controller-manager manifests, for what
		// mizzen's reads and writes.
		clusterRole("system:cloud-controller-manager", rules(
			rule("create", "patch", "update").groups(legacyGroup).resources("events"),
			rule("get", "list", "watch", "update", "patch", "delete").groups(legacyGroup).resources("nodes"),
			rule("patch").groups(legacyGroup).resources("nodes/status"),
			rule("get", "list", "watch", "patch", "update").groups(legacyGroup).resources("services"),
			rule("patch", "update").groups(legacyGroup).resources("services/status"),
			rule("create").groups(coordinationGroup).resources("leases"),
			rule("get", "update").groups(coordinationGroup).resources("leases").names("cloud-controller-manager"),
		)),
		// As ingress-nginx's own ClusterRole, for what mizzen's controller reads and writes.
		clusterRole("system:mizzen-ingress", rules(
			rule("get", "list", "watch").groups(legacyGroup).resources("services", "secrets"),
			rule("get", "list", "watch").groups(discoveryGroup).resources("endpointslices"),
			rule("get", "list", "watch").groups(networkingGroup).resources("ingresses", "ingressclasses"),
			rule("update").groups(networkingGroup).resources("ingresses/status"),
			rule("create", "patch").groups(legacyGroup).resources("events"),
		)),
		// What each node's NetworkPolicy enforcement reads, as kube-router's or Calico's
		// node agents.
		clusterRole("system:mizzen-network-policy", rules(
			rule("get", "list", "watch").groups(legacyGroup).resources("pods", "namespaces"),
			rule("get", "list", "watch").groups(networkingGroup).resources("networkpolicies"),
		)),
		// What each node's local-path sweeper (internal/localpath) reads: whether the
		// volume of a directory on the node still exists. The Node authorizer cannot
		// answer that (a deleted volume has no edge to the node, so it is refused, not
		// NotFound), so RBAC grants nodes this one read.
		clusterRole("system:mizzen-local-path-node", rules(
			rule("get").groups(legacyGroup).resources("persistentvolumes"),
		)),
	}
}

// AddonClusterRoleBindings bind the add-on roles to the identities `mizzen server`
// gives the bundled DNS (the user system:kube-dns, and kubeadm's kube-system/coredns
// account), metrics server (system:metrics-server) and Ingress controller
// (system:mizzen-ingress), and the apiserver's kubelet client to
// system:kubelet-api-admin, as kubeadm does.
func AddonClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		clusterRoleBinding("system:coredns", append(subjects(rbacv1.UserKind, "system:kube-dns"),
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "coredns", Namespace: "kube-system"})),
		clusterRoleBinding("system:metrics-server", subjects(rbacv1.UserKind, "system:metrics-server")),
		// The apiserver's client certificate for kubelets (logs, exec, attach,
		// port-forward, the nodes proxy), which kubelets authorize by a
		// SubjectAccessReview, as kubeadm binds it.
		clusterRoleBinding("system:kubelet-api-admin", subjects(rbacv1.UserKind, "kube-apiserver-kubelet-client")),
		clusterRoleBinding("system:mizzen-ingress", subjects(rbacv1.UserKind, "system:mizzen-ingress")),
		clusterRoleBinding("system:cloud-controller-manager", subjects(rbacv1.UserKind, "system:cloud-controller-manager")),
		// A joined agent enforces policies with its network identity, the proxy's.
		clusterRoleBinding("system:mizzen-network-policy", subjects(rbacv1.UserKind, "system:mizzen-network-policy", "system:kube-proxy")),
		clusterRoleBinding("system:mizzen-local-path-node", subjects(rbacv1.GroupKind, "system:nodes")),
	}
}

func aggregateToEditRules() []rbacv1.PolicyRule {
	write := []string{"create", "delete", "deletecollection", "patch", "update"}
	return rules(
		rule(readVerbs...).groups(legacyGroup).resources("pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"),
		rule("impersonate").groups(legacyGroup).resources("serviceaccounts"),
		rule(write...).groups(legacyGroup).resources("pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"),
		rule("create").groups(legacyGroup).resources("pods/eviction"),
		rule(write...).groups(legacyGroup).resources("configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
			"replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"),
		rule("create").groups(legacyGroup).resources("serviceaccounts/token"),
		rule(write...).groups(appsGroup).resources("daemonsets", "deployments", "deployments/rollback", "deployments/scale",
			"replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"),
		rule(write...).groups(autoscalingGroup).resources("horizontalpodautoscalers"),
		rule(write...).groups(batchGroup).resources("cronjobs", "jobs"),
		rule(write...).groups(extensionsGroup).resources("daemonsets", "deployments", "deployments/rollback", "deployments/scale",
			"ingresses", "networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"),
		rule(write...).groups(policyGroup).resources("poddisruptionbudgets"),
		rule(write...).groups(networkingGroup).resources("ingresses", "networkpolicies"),
		rule(append(readVerbs, writeVerbs...)...).groups(coordinationGroup).resources("leases"),
	)
}

func aggregateToViewRules() []rbacv1.PolicyRule {
	return rules(
		rule(readVerbs...).groups(legacyGroup).resources("configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status",
			"pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"),
		rule(readVerbs...).groups(legacyGroup).resources("bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
			"replicationcontrollers/status", "resourcequotas", "resourcequotas/status"),
		rule(readVerbs...).groups(legacyGroup).resources("namespaces"),
		rule(readVerbs...).groups(discoveryGroup).resources("endpointslices"),
		rule(readVerbs...).groups(appsGroup).resources("controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
			"deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
			"statefulsets/scale", "statefulsets/status"),
		rule(readVerbs...).groups(autoscalingGroup).resources("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
		rule(readVerbs...).groups(batchGroup).resources("cronjobs", "cronjobs/status", "jobs", "jobs/status"),
		rule(readVerbs...).groups(extensionsGroup).resources("daemonsets", "daemonsets/status", "deployments", "deployments/scale",
			"deployments/status", "ingresses", "ingresses/status", "networkpolicies", "replicasets", "replicasets/scale",
			"replicasets/status", "replicationcontrollers/scale"),
		rule(readVerbs...).groups(policyGroup).resources("poddisruptionbudgets", "poddisruptionbudgets/status"),
		rule(readVerbs...).groups(networkingGroup).resources("ingresses", "ingresses/status", "networkpolicies"),
	)
}

// controllerManagerRules are upstream's system:kube-controller-manager rules: the
// manager's own identity elects the leader, lists and watches for the shared informers,
// and makes the controllers' ServiceAccounts and their tokens; each controller then
// works with its own account's system:controller:* role (controllers.go).
func controllerManagerRules() []rbacv1.PolicyRule {
	return rules(
		rule("create", "patch", "update").groups(legacyGroup, eventsGroup).resources("events"),
		rule("create").groups(coordinationGroup).resources("leases"),
		rule("get", "update").groups(coordinationGroup).resources("leases").names("kube-controller-manager"),
		rule("create").groups(legacyGroup).resources("secrets", "serviceaccounts"),
		rule("delete").groups(legacyGroup).resources("secrets"),
		rule("get").groups(legacyGroup).resources("configmaps", "namespaces", "secrets", "serviceaccounts"),
		rule("update").groups(legacyGroup).resources("secrets", "serviceaccounts"),
		rule("create").groups(authnGroup).resources("tokenreviews"),
		rule("create").groups(authzGroup).resources("subjectaccessreviews"),
		rule("list", "watch").groups("*").resources("*"),
		rule("create").groups(legacyGroup).resources("serviceaccounts/token"),
	)
}

// schedulerRules are upstream's system:kube-scheduler rules. Deviation: mizzen's
// scheduler also watches PriorityClasses (preemption looks up the priority of pods
// created before their class); upstream's scheduler does not.
func schedulerRules() []rbacv1.PolicyRule {
	return rules(
		rule("create", "patch", "update").groups(legacyGroup, eventsGroup).resources("events"),
		rule("create").groups(coordinationGroup).resources("leases"),
		rule("get", "update").groups(coordinationGroup).resources("leases").names("kube-scheduler"),
		rule(readVerbs...).groups(legacyGroup).resources("nodes"),
		rule("delete", "get", "list", "watch").groups(legacyGroup).resources("pods"),
		rule("create").groups(legacyGroup).resources("bindings", "pods/binding"),
		rule("patch", "update").groups(legacyGroup).resources("pods/status"),
		rule(readVerbs...).groups(legacyGroup).resources("replicationcontrollers", "services"),
		rule(readVerbs...).groups(appsGroup, extensionsGroup).resources("replicasets"),
		rule(readVerbs...).groups(appsGroup).resources("statefulsets"),
		rule(readVerbs...).groups(policyGroup).resources("poddisruptionbudgets"),
		rule(readVerbs...).groups(legacyGroup).resources("persistentvolumeclaims", "persistentvolumes"),
		rule("create").groups(authnGroup).resources("tokenreviews"),
		rule("create").groups(authzGroup).resources("subjectaccessreviews"),
		rule(readVerbs...).groups(storageGroup).resources("csinodes"),
		rule(readVerbs...).groups(legacyGroup).resources("namespaces"),
		rule(readVerbs...).groups(storageGroup).resources("csidrivers"),
		rule(readVerbs...).groups(storageGroup).resources("csistoragecapacities"),
		rule(readVerbs...).groups(schedulingGroup).resources("priorityclasses"),
	)
}

// nodeRules are upstream's system:node rules. Upstream limits each kubelet to its own
// node's objects with the Node authorizer, which mizzen does not have; the role is
// bound to the group system:nodes instead (see ClusterRoleBindings).
// NodeRules are the system:node role's rules, which the Node authorizer grants
// kubelets beyond their node's objects.
func NodeRules() []rbacv1.PolicyRule { return nodeRules() }

func nodeRules() []rbacv1.PolicyRule {
	return rules(
		rule("create").groups(authnGroup).resources("tokenreviews"),
		rule("create").groups(authzGroup).resources("localsubjectaccessreviews", "subjectaccessreviews"),
		rule(readVerbs...).groups(legacyGroup).resources("services"),
		rule("create", "get", "list", "watch").groups(legacyGroup).resources("nodes"),
		rule("patch", "update").groups(legacyGroup).resources("nodes/status"),
		rule("patch", "update").groups(legacyGroup).resources("nodes"),
		rule("create", "patch", "update").groups(legacyGroup).resources("events"),
		rule(readVerbs...).groups(legacyGroup).resources("pods"),
		rule("create", "delete").groups(legacyGroup).resources("pods"),
		rule("patch", "update").groups(legacyGroup).resources("pods/status"),
		rule("create").groups(legacyGroup).resources("pods/eviction"),
		rule(readVerbs...).groups(legacyGroup).resources("configmaps", "secrets"),
		rule("get").groups(legacyGroup).resources("persistentvolumeclaims", "persistentvolumes"),
		rule("get").groups(legacyGroup).resources("endpoints"),
		rule("create", "get", "list", "watch").groups(certificatesGroup).resources("certificatesigningrequests"),
		rule("create", "delete", "get", "patch", "update").groups(coordinationGroup).resources("leases"),
		rule("get").groups(storageGroup).resources("volumeattachments"),
		rule("create").groups(legacyGroup).resources("serviceaccounts/token"),
		rule("get", "patch", "update").groups(legacyGroup).resources("persistentvolumeclaims/status"),
		rule(readVerbs...).groups(storageGroup).resources("csidrivers"),
		rule("create", "delete", "get", "patch", "update").groups(storageGroup).resources("csinodes"),
		rule(readVerbs...).groups(nodeGroup).resources("runtimeclasses"),
		rule(readVerbs...).groups(certificatesGroup).resources("clustertrustbundles"),
		rule("create", "get", "list", "watch").groups(certificatesGroup).resources("podcertificaterequests"),
	)
}

func subjects(kind string, names ...string) []rbacv1.Subject {
	out := make([]rbacv1.Subject, len(names))
	for i, n := range names {
		out[i] = rbacv1.Subject{Kind: kind, Name: n}
		if kind != rbacv1.ServiceAccountKind {
			out[i].APIGroup = rbacv1.GroupName
		}
	}
	return out
}

func clusterRoleBinding(role string, s []rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		ObjectMeta: objectMeta(role),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   s,
	}
}

// UIRole lets everyone load the web UI served at /ui/ (nonResourceURL get on /ui/*).
const UIRole = "mizzen:ui"

// ClusterRoleBindings are the default cluster role bindings, each named after its role.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	kubeDNS := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "kube-dns", Namespace: "kube-system"}}
	return []rbacv1.ClusterRoleBinding{
		clusterRoleBinding("cluster-admin", subjects(rbacv1.GroupKind, "system:masters")),
		clusterRoleBinding("system:basic-user", subjects(rbacv1.GroupKind, "system:authenticated")),
		clusterRoleBinding("system:discovery", subjects(rbacv1.GroupKind, "system:authenticated")),
		clusterRoleBinding("system:kube-controller-manager", subjects(rbacv1.UserKind, "system:kube-controller-manager")),
		clusterRoleBinding("system:kube-dns", kubeDNS),
		clusterRoleBinding("system:kube-scheduler", subjects(rbacv1.UserKind, "system:kube-scheduler")),
		clusterRoleBinding("system:monitoring", subjects(rbacv1.GroupKind, "system:monitoring")),
		// No subjects, as upstream's: the Node authorizer grants kubelets their node's
		// objects and the role's other rules (NodeRules).
		clusterRoleBinding("system:node", nil),
		clusterRoleBinding("system:node-proxier", subjects(rbacv1.UserKind, "system:kube-proxy")),
		clusterRoleBinding("system:public-info-viewer", subjects(rbacv1.GroupKind, "system:authenticated", "system:unauthenticated")),
		clusterRoleBinding(UIRole, subjects(rbacv1.GroupKind, "system:authenticated", "system:unauthenticated")),
		clusterRoleBinding("system:service-account-issuer-discovery", subjects(rbacv1.GroupKind, "system:serviceaccounts")),
		clusterRoleBinding("system:volume-scheduler", subjects(rbacv1.UserKind, "system:kube-scheduler")),
	}
}

// namespacedObjectMeta is objectMeta in a namespace.
func namespacedObjectMeta(namespace, name string) metav1.ObjectMeta {
	m := objectMeta(name)
	m.Namespace = namespace
	return m
}

// Roles are upstream's default roles in kube-system: reading the ConfigMap where the
// apiserver publishes its client authentication settings (extension apiservers such as
// the metrics server read it), and the ConfigMap leader locks older components used.
func Roles() []rbacv1.Role {
	return []rbacv1.Role{
		{ObjectMeta: namespacedObjectMeta("kube-system", "extension-apiserver-authentication-reader"), Rules: rules(
			rule("get", "list", "watch").groups(legacyGroup).resources("configmaps").names("extension-apiserver-authentication"),
		)},
		{ObjectMeta: namespacedObjectMeta("kube-system", "system::leader-locking-kube-controller-manager"), Rules: rules(
			rule("watch").groups(legacyGroup).resources("configmaps"),
			rule("get", "update").groups(legacyGroup).resources("configmaps").names("kube-controller-manager"),
		)},
		{ObjectMeta: namespacedObjectMeta("kube-system", "system::leader-locking-kube-scheduler"), Rules: rules(
			rule("watch").groups(legacyGroup).resources("configmaps"),
			rule("get", "update").groups(legacyGroup).resources("configmaps").names("kube-scheduler"),
		)},
	}
}

func roleBinding(namespace, name, role string, s []rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{
		ObjectMeta: namespacedObjectMeta(namespace, name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   s,
	}
}

// RoleBindings are upstream's default role bindings in kube-system.
func RoleBindings() []rbacv1.RoleBinding {
	sa := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "kube-system"}
	}
	return []rbacv1.RoleBinding{
		roleBinding("kube-system", "system::extension-apiserver-authentication-reader", "extension-apiserver-authentication-reader",
			subjects(rbacv1.UserKind, "system:kube-controller-manager", "system:kube-scheduler")),
		roleBinding("kube-system", "system::leader-locking-kube-controller-manager", "system::leader-locking-kube-controller-manager",
			append(subjects(rbacv1.UserKind, "system:kube-controller-manager"), sa("kube-controller-manager"))),
		roleBinding("kube-system", "system::leader-locking-kube-scheduler", "system::leader-locking-kube-scheduler",
			append(subjects(rbacv1.UserKind, "system:kube-scheduler"), sa("kube-scheduler"))),
		// The bundled metrics server reads the apiserver's client authentication
		// settings, as its own manifest binds it upstream.
		roleBinding("kube-system", "metrics-server-auth-reader", "extension-apiserver-authentication-reader",
			subjects(rbacv1.UserKind, "system:metrics-server")),
	}
}
