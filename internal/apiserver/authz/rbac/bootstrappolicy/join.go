package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"mizzen/internal/jointoken"
)

// Node joining: upstream's CSR roles, and the bindings kubeadm creates for a cluster
// that nodes join with bootstrap tokens, here for mizzen's agent token group.

const (
	nodeClientRole     = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	selfNodeClientRole = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
	clusterInfoRole    = "kubeadm:bootstrap-signer-clusterinfo"
)

// signerApprover is upstream's role letting its holder approve CSRs for one signer.
func signerApprover(role, signer string) rbacv1.ClusterRole {
	return clusterRole(role, rules(rule("approve").groups(certificatesGroup).resources("signers").names(signer)))
}

// joinClusterRoles are upstream's certificate roles.
func joinClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		clusterRole(nodeClientRole, rules(rule("create").groups(certificatesGroup).resources("certificatesigningrequests/nodeclient"))),
		clusterRole(selfNodeClientRole, rules(rule("create").groups(certificatesGroup).resources("certificatesigningrequests/selfnodeclient"))),
		signerApprover("system:certificates.k8s.io:kube-apiserver-client-approver", "kubernetes.io/kube-apiserver-client"),
		signerApprover("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", "kubernetes.io/kube-apiserver-client-kubelet"),
		signerApprover("system:certificates.k8s.io:kubelet-serving-approver", "kubernetes.io/kubelet-serving"),
		signerApprover("system:certificates.k8s.io:legacy-unknown-approver", "kubernetes.io/legacy-unknown"),
	}
}

// joinClusterRoleBindings let an agent token's holder file its node's client CSR
// and have it approved, and let nodes renew their own client certificates, as
// kubeadm's kubeadm:kubelet-bootstrap, kubeadm:node-autoapprove-bootstrap and
// kubeadm:node-autoapprove-certificate-rotation do.
func joinClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	agents := subjects(rbacv1.GroupKind, jointoken.RoleAgent.Group())
	bind := func(name, role string, s []rbacv1.Subject) rbacv1.ClusterRoleBinding {
		b := clusterRoleBinding(role, s)
		b.ObjectMeta = objectMeta(name)
		return b
	}
	return []rbacv1.ClusterRoleBinding{
		bind("mizzen:kubelet-bootstrap", "system:node-bootstrapper", agents),
		bind("mizzen:node-autoapprove-bootstrap", nodeClientRole, agents),
		bind("mizzen:node-autoapprove-certificate-rotation", selfNodeClientRole, subjects(rbacv1.GroupKind, "system:nodes")),
	}
}

// joinRoles is kubeadm's role reading kube-public/cluster-info, the one object a
// joining machine reads before it trusts the server.
func joinRoles() []rbacv1.Role {
	return []rbacv1.Role{{ObjectMeta: namespacedObjectMeta(jointoken.ClusterInfoNamespace, clusterInfoRole), Rules: rules(
		rule("get").groups(legacyGroup).resources("configmaps").names(jointoken.ClusterInfoName),
	)}}
}

// joinRoleBindings grant it to system:anonymous, as kubeadm does.
func joinRoleBindings() []rbacv1.RoleBinding {
	return []rbacv1.RoleBinding{roleBinding(jointoken.ClusterInfoNamespace, clusterInfoRole, clusterInfoRole,
		subjects(rbacv1.UserKind, "system:anonymous"))}
}
