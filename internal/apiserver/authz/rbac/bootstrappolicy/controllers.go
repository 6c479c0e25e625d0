package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// The controllers' own roles: with --use-service-account-credentials (on in `mizzen
// server`, as kubeadm sets it) the controller-manager runs each controller as the
// ServiceAccount kube-system/NAME, which upstream's bootstrap policy binds to the
// ClusterRole system:controller:NAME. The rules are upstream's, for the controllers
// upstream enables by default; where one of mizzen's controllers needs more, the rule
// is added here with a comment saying why.

// ControllerRolePrefix names every controller's ClusterRole, as upstream's.
const ControllerRolePrefix = "system:controller:"

// ControllerNamespace holds the controllers' ServiceAccounts.
const ControllerNamespace = "kube-system"

// LocalPathProvisionerAccount is the ServiceAccount of mizzen's bundled local-path
// provisioner, which upstream has no role for.
const LocalPathProvisionerAccount = "local-path-provisioner"

// eventsRule lets a controller record events, as every upstream controller role does.
func eventsRule() *ruleBuilder {
	return rule("create", "update", "patch").groups(legacyGroup, eventsGroup).resources("events")
}

func controllerRole(name string, r ...*ruleBuilder) rbacv1.ClusterRole {
	return clusterRole(ControllerRolePrefix+name, rules(r...))
}

// ControllerClusterRoles are upstream's system:controller:* roles, and mizzen's
// local-path provisioner's.
func ControllerClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		controllerRole("attachdetach-controller",
			rule("list", "watch").groups(legacyGroup).resources("persistentvolumes", "persistentvolumeclaims"),
			rule(readVerbs...).groups(legacyGroup).resources("nodes"),
			rule("patch", "update").groups(legacyGroup).resources("nodes/status"),
			rule("list", "watch").groups(legacyGroup).resources("pods"),
			eventsRule(),
			rule("get", "create", "delete", "list", "watch").groups(storageGroup).resources("volumeattachments"),
			rule(readVerbs...).groups(storageGroup).resources("csidrivers"),
			rule(readVerbs...).groups(storageGroup).resources("csinodes"),
		),
		controllerRole("certificate-controller",
			rule("get", "list", "watch", "delete").groups(certificatesGroup).resources("certificatesigningrequests"),
			rule("update").groups(certificatesGroup).resources("certificatesigningrequests/status", "certificatesigningrequests/approval"),
			rule("approve").groups(certificatesGroup).resources("signers").names("kubernetes.io/kube-apiserver-client-kubelet"),
			rule("sign").groups(certificatesGroup).resources("signers").names("kubernetes.io/legacy-unknown",
				"kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"),
			rule("create").groups(authzGroup).resources("subjectaccessreviews"),
			eventsRule(),
			// Deviation: mizzen's csrapproving also approves a node's kubelet serving
			// certificate for its own addresses, and its proxy's system:kube-proxy
			// client certificate (docs/joining.md), which upstream leaves to others.
			rule("approve").groups(certificatesGroup).resources("signers").names("kubernetes.io/kubelet-serving", "kubernetes.io/kube-apiserver-client"),
		),
		controllerRole("clusterrole-aggregation-controller",
			rule("escalate", "get", "list", "watch", "update", "patch").groups(rbacGroup).resources("clusterroles"),
		),
		controllerRole("cronjob-controller",
			rule("get", "list", "watch", "update").groups(batchGroup).resources("cronjobs"),
			rule("get", "list", "watch", "create", "update", "delete", "patch").groups(batchGroup).resources("jobs"),
			rule("update").groups(batchGroup).resources("cronjobs/status"),
			rule("update").groups(batchGroup).resources("cronjobs/finalizers"),
			rule("list", "watch", "delete").groups(legacyGroup).resources("pods"),
			eventsRule(),
		),
		controllerRole("daemon-set-controller",
			rule(readVerbs...).groups(extensionsGroup, appsGroup).resources("daemonsets"),
			rule("update").groups(extensionsGroup, appsGroup).resources("daemonsets/status"),
			rule("update").groups(extensionsGroup, appsGroup).resources("daemonsets/finalizers"),
			rule("list", "watch").groups(legacyGroup).resources("nodes"),
			rule("list", "watch", "create", "delete", "patch").groups(legacyGroup).resources("pods"),
			rule("create").groups(legacyGroup).resources("pods/binding"),
			rule("get", "list", "watch", "create", "delete", "update", "patch").groups(appsGroup).resources("controllerrevisions"),
			eventsRule(),
		),
		controllerRole("deployment-controller",
			rule("get", "list", "watch", "update").groups(extensionsGroup, appsGroup).resources("deployments"),
			rule("update").groups(extensionsGroup, appsGroup).resources("deployments/status"),
			rule("update").groups(extensionsGroup, appsGroup).resources("deployments/finalizers"),
			rule("get", "list", "watch", "create", "update", "patch", "delete").groups(appsGroup, extensionsGroup).resources("replicasets"),
			rule("get", "list", "watch", "update").groups(legacyGroup).resources("pods"),
			eventsRule(),
		),
		controllerRole("disruption-controller",
			rule(readVerbs...).groups(extensionsGroup, appsGroup).resources("deployments"),
			rule(readVerbs...).groups(appsGroup, extensionsGroup).resources("replicasets"),
			rule(readVerbs...).groups(legacyGroup).resources("replicationcontrollers"),
			rule(readVerbs...).groups(policyGroup).resources("poddisruptionbudgets"),
			rule(readVerbs...).groups(appsGroup).resources("statefulsets"),
			rule("update").groups(policyGroup).resources("poddisruptionbudgets/status"),
			rule("patch", "update").groups(legacyGroup).resources("pods/status"),
			rule("get").groups("*").resources("*/scale"),
			eventsRule(),
		),
		controllerRole("endpoint-controller",
			rule(readVerbs...).groups(legacyGroup).resources("services", "pods"),
			rule("get", "list", "watch", "create", "update", "delete").groups(legacyGroup).resources("endpoints"),
			rule("create").groups(legacyGroup).resources("endpoints/restricted"),
			eventsRule(),
		),
		controllerRole("endpointslice-controller",
			rule(readVerbs...).groups(legacyGroup).resources("services", "pods", "nodes"),
			rule("update").groups(legacyGroup).resources("services/finalizers"),
			rule("get", "list", "watch", "create", "update", "delete").groups(discoveryGroup).resources("endpointslices"),
			eventsRule(),
		),
		controllerRole("endpointslicemirroring-controller",
			rule(readVerbs...).groups(legacyGroup).resources("services", "endpoints"),
			rule("update").groups(legacyGroup).resources("services/finalizers"),
			rule("update").groups(legacyGroup).resources("endpoints/finalizers"),
			rule("get", "list", "watch", "create", "update", "delete").groups(discoveryGroup).resources("endpointslices"),
			eventsRule(),
		),
		controllerRole("ephemeral-volume-controller",
			rule(readVerbs...).groups(legacyGroup).resources("pods"),
			rule("update").groups(legacyGroup).resources("pods/finalizers"),
			rule("get", "list", "watch", "create").groups(legacyGroup).resources("persistentvolumeclaims"),
			eventsRule(),
		),
		controllerRole("expand-controller",
			rule("get", "list", "watch", "update", "patch").groups(legacyGroup).resources("persistentvolumes"),
			rule("update", "patch").groups(legacyGroup).resources("persistentvolumeclaims/status"),
			rule(readVerbs...).groups(legacyGroup).resources("persistentvolumeclaims"),
			eventsRule(),
			rule("get").groups(legacyGroup).resources("services"),
			// Deviation: mizzen's expander sets the claim's resizer annotation with an
			// update of the claim itself; its status subresource keeps only the status.
			rule("update").groups(legacyGroup).resources("persistentvolumeclaims"),
		),
		controllerRole("generic-garbage-collector",
			rule("get", "list", "watch", "patch", "update", "delete").groups("*").resources("*"),
			eventsRule(),
		),
		controllerRole("horizontal-pod-autoscaler",
			rule(readVerbs...).groups(autoscalingGroup).resources("horizontalpodautoscalers"),
			rule("update").groups(autoscalingGroup).resources("horizontalpodautoscalers/status"),
			rule("get", "update").groups("*").resources("*/scale"),
			rule("list", "watch").groups(legacyGroup).resources("pods"),
			rule("list", "watch").groups(metricsGroup).resources("pods"),
			rule(readVerbs...).groups("custom.metrics.k8s.io").resources("*"),
			rule(readVerbs...).groups("external.metrics.k8s.io").resources("*"),
			eventsRule(),
		),
		controllerRole("job-controller",
			rule("get", "list", "watch", "update", "patch").groups(batchGroup).resources("jobs"),
			rule("update").groups(batchGroup).resources("jobs/status"),
			rule("update").groups(batchGroup).resources("jobs/finalizers"),
			rule("list", "watch", "create", "delete", "patch").groups(legacyGroup).resources("pods"),
			eventsRule(),
		),
		controllerRole("legacy-service-account-token-cleaner",
			rule("get").groups(legacyGroup).resources("configmaps").names("kube-apiserver-legacy-service-account-token-tracking"),
			rule("patch", "delete").groups(legacyGroup).resources("secrets"),
		),
		controllerRole("namespace-controller",
			rule("get", "list", "watch", "delete").groups(legacyGroup).resources("namespaces"),
			rule("update").groups(legacyGroup).resources("namespaces/finalize", "namespaces/status"),
			rule("get", "list", "watch", "delete", "deletecollection").groups("*").resources("*"),
		),
		controllerRole("node-controller",
			rule("get", "list", "watch", "update", "delete", "patch").groups(legacyGroup).resources("nodes"),
			rule("patch", "update").groups(legacyGroup).resources("nodes/status"),
			rule("patch", "update").groups(legacyGroup).resources("pods/status"),
			rule("list", "watch", "get", "delete").groups(legacyGroup).resources("pods"),
			eventsRule(),
		),
		controllerRole("persistent-volume-binder",
			rule("get", "list", "watch", "update", "create", "delete").groups(legacyGroup).resources("persistentvolumes"),
			rule("update").groups(legacyGroup).resources("persistentvolumes/status"),
			rule("get", "list", "watch", "update").groups(legacyGroup).resources("persistentvolumeclaims"),
			rule("update").groups(legacyGroup).resources("persistentvolumeclaims/status"),
			rule("list", "watch", "get", "create", "delete").groups(legacyGroup).resources("pods"),
			rule(readVerbs...).groups(storageGroup).resources("storageclasses"),
			rule("list", "watch").groups(legacyGroup).resources("nodes"),
			eventsRule(),
			rule("watch").groups(legacyGroup).resources("events"),
			rule("get").groups(legacyGroup).resources("services"),
		),
		controllerRole("pod-garbage-collector",
			rule("list", "watch", "delete").groups(legacyGroup).resources("pods"),
			rule(readVerbs...).groups(legacyGroup).resources("nodes"),
			rule("patch").groups(legacyGroup).resources("pods/status"),
		),
		controllerRole("pv-protection-controller",
			rule("get", "list", "watch", "update").groups(legacyGroup).resources("persistentvolumes"),
			eventsRule(),
		),
		controllerRole("pvc-protection-controller",
			rule("get", "list", "watch", "update").groups(legacyGroup).resources("persistentvolumeclaims"),
			rule("list", "watch", "get").groups(legacyGroup).resources("pods"),
			eventsRule(),
		),
		controllerRole("replicaset-controller",
			rule("get", "list", "watch", "update").groups(appsGroup, extensionsGroup).resources("replicasets"),
			rule("update").groups(appsGroup, extensionsGroup).resources("replicasets/status"),
			rule("update").groups(appsGroup, extensionsGroup).resources("replicasets/finalizers"),
			rule("list", "watch", "patch", "create", "delete").groups(legacyGroup).resources("pods"),
			eventsRule(),
		),
		controllerRole("replication-controller",
			rule("get", "list", "watch", "update").groups(legacyGroup).resources("replicationcontrollers"),
			rule("update").groups(legacyGroup).resources("replicationcontrollers/status"),
			rule("update").groups(legacyGroup).resources("replicationcontrollers/finalizers"),
			rule("list", "watch", "patch", "create", "delete").groups(legacyGroup).resources("pods"),
			eventsRule(),
		),
		controllerRole("resource-claim-controller",
			rule(readVerbs...).groups(legacyGroup).resources("pods"),
			rule("update").groups(legacyGroup).resources("pods/finalizers"),
			rule("get", "list", "watch", "create", "delete").groups(resourceGroup).resources("resourceclaims"),
			rule("update", "patch").groups(resourceGroup).resources("resourceclaims", "resourceclaims/status"),
			rule("update", "patch").groups(legacyGroup).resources("pods/status"),
			eventsRule(),
		),
		controllerRole("resourcequota-controller",
			rule("list", "watch").groups("*").resources("*"),
			rule("update").groups(legacyGroup).resources("resourcequotas/status"),
			eventsRule(),
		),
		controllerRole("root-ca-cert-publisher",
			rule("create", "update").groups(legacyGroup).resources("configmaps"),
			eventsRule(),
		),
		controllerRole("route-controller",
			rule("list", "watch").groups(legacyGroup).resources("nodes"),
			rule("patch").groups(legacyGroup).resources("nodes/status"),
			eventsRule(),
		),
		controllerRole("selinux-warning-controller",
			eventsRule(),
			rule(readVerbs...).groups(legacyGroup).resources("persistentvolumes"),
			rule(readVerbs...).groups(legacyGroup).resources("persistentvolumeclaims"),
			rule(readVerbs...).groups(legacyGroup).resources("pods"),
			rule(readVerbs...).groups(storageGroup).resources("csidrivers"),
		),
		controllerRole("service-account-controller",
			rule("create").groups(legacyGroup).resources("serviceaccounts"),
			eventsRule(),
		),
		controllerRole("service-cidrs-controller",
			rule("get", "list", "watch", "patch", "update").groups(networkingGroup).resources("servicecidrs"),
			rule("patch", "update").groups(networkingGroup).resources("servicecidrs/finalizers"),
			rule("patch", "update").groups(networkingGroup).resources("servicecidrs/status"),
			rule(readVerbs...).groups(networkingGroup).resources("ipaddresses"),
			eventsRule(),
		),
		controllerRole("service-controller",
			rule(readVerbs...).groups(legacyGroup).resources("services"),
			rule("patch", "update").groups(legacyGroup).resources("services/status"),
			rule("list", "watch").groups(legacyGroup).resources("nodes"),
			eventsRule(),
		),
		controllerRole("statefulset-controller",
			rule("list", "watch").groups(legacyGroup).resources("pods"),
			rule(readVerbs...).groups(appsGroup).resources("statefulsets"),
			rule("update").groups(appsGroup).resources("statefulsets/status"),
			rule("update").groups(appsGroup).resources("statefulsets/finalizers"),
			rule("get", "create", "delete", "update", "patch").groups(legacyGroup).resources("pods"),
			rule("get", "create", "delete", "update", "patch", "list", "watch").groups(appsGroup).resources("controllerrevisions"),
			rule("get", "create", "list", "watch").groups(legacyGroup).resources("persistentvolumeclaims"),
			rule("update", "delete").groups(legacyGroup).resources("persistentvolumeclaims"),
			rule("update").groups(legacyGroup).resources("pods/finalizers"),
			eventsRule(),
		),
		controllerRole("ttl-after-finished-controller",
			rule("get", "list", "watch", "delete").groups(batchGroup).resources("jobs"),
			eventsRule(),
		),
		controllerRole("ttl-controller",
			rule("update", "patch", "list", "watch").groups(legacyGroup).resources("nodes"),
			eventsRule(),
		),
		controllerRole("validatingadmissionpolicy-status-controller",
			rule(readVerbs...).groups(admissionRegistrationGroup).resources("validatingadmissionpolicies"),
			rule("get", "patch", "update").groups(admissionRegistrationGroup).resources("validatingadmissionpolicies/status"),
			eventsRule(),
		),
		controllerRole("volumeattributesclass-protection-controller",
			rule("list", "watch", "get").groups(legacyGroup).resources("persistentvolumeclaims"),
			rule("list", "watch", "get").groups(legacyGroup).resources("persistentvolumes"),
			rule("get", "list", "watch", "update").groups(storageGroup).resources("volumeattributesclasses"),
			eventsRule(),
		),
		// mizzen's bundled local-path provisioner (k3s's has a role of its own too): it
		// creates, binds and deletes the volumes of its class, and creates the class.
		controllerRole(LocalPathProvisionerAccount,
			rule("get", "list", "watch", "create", "update", "delete").groups(legacyGroup).resources("persistentvolumes"),
			rule(readVerbs...).groups(legacyGroup).resources("persistentvolumeclaims"),
			rule("update").groups(legacyGroup).resources("persistentvolumeclaims/status"),
			rule("get", "list", "watch", "create", "update").groups(storageGroup).resources("storageclasses"),
			rule("list", "watch").groups(legacyGroup).resources("nodes"),
			eventsRule(),
		),
	}
}

// ControllerClusterRoleBindings bind each controller role to the ServiceAccount
// kube-system/NAME, as upstream's.
func ControllerClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	var out []rbacv1.ClusterRoleBinding
	for _, r := range ControllerClusterRoles() {
		name := r.Name[len(ControllerRolePrefix):]
		out = append(out, clusterRoleBinding(r.Name, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ControllerNamespace}}))
	}
	return out
}

// controllerRoles are upstream's namespaced controller roles: the bootstrap token
// cleaner's and signer's.
func controllerRoles() []rbacv1.Role {
	role := func(namespace, name string, r ...*ruleBuilder) rbacv1.Role {
		return rbacv1.Role{ObjectMeta: namespacedObjectMeta(namespace, ControllerRolePrefix+name), Rules: rules(r...)}
	}
	return []rbacv1.Role{
		role(ControllerNamespace, "bootstrap-signer",
			rule(readVerbs...).groups(legacyGroup).resources("secrets"),
		),
		role("kube-public", "bootstrap-signer",
			rule(readVerbs...).groups(legacyGroup).resources("configmaps"),
			rule("update").groups(legacyGroup).resources("configmaps").names("cluster-info"),
			eventsRule(),
		),
		role(ControllerNamespace, "token-cleaner",
			rule("get", "list", "watch", "delete").groups(legacyGroup).resources("secrets"),
			eventsRule(),
		),
	}
}

// controllerRoleBindings bind them to their ServiceAccounts in kube-system.
func controllerRoleBindings() []rbacv1.RoleBinding {
	var out []rbacv1.RoleBinding
	for _, r := range controllerRoles() {
		name := r.Name[len(ControllerRolePrefix):]
		out = append(out, roleBinding(r.Namespace, r.Name, r.Name,
			[]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ControllerNamespace}}))
	}
	return out
}
