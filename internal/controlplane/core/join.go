package core

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/datadir"
	"mizzen/internal/jointoken"
	"mizzen/internal/serverjoin"
)

// clusterInfoReader names the Role and RoleBinding that let anyone read cluster-info
// (kubeadm's kubeadm:bootstrap-signer-clusterinfo).
const clusterInfoReader = "mizzen:bootstrap-signer-clusterinfo"

// clusterInfoObjects are kube-public/cluster-info, from which a joining machine reads
// the CA it then checks against its token, and the RBAC that lets system:anonymous
// read it, as kubeadm publishes them.
func clusterInfoObjects(server string, caPEM []byte) ([]runtime.Object, error) {
	cm, err := jointoken.ClusterInfo(server, caPEM)
	if err != nil {
		return nil, err
	}
	meta := metav1.ObjectMeta{Name: clusterInfoReader, Namespace: jointoken.ClusterInfoNamespace}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{jointoken.ClusterInfoName}, Verbs: []string{"get"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: clusterInfoReader},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:anonymous"}}}
	return []runtime.Object{cm, role, binding}, nil
}

// joinHandler answers servers joining this one's cluster (serverjoin.Path) and passes
// every other request to api. Only a server whose etcd member belongs to a cluster
// of servers (--cluster-init, or one that joined) hands out the secrets.
func joinHandler(api http.Handler, admin *rest.Config, dir datadir.Dir, saKeyFile string, etcdClient *clientv3.Client, log *slog.Logger) (http.Handler, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	join := &serverjoin.Handler{Client: cs, Log: log.With("component", "server-join"),
		Collect: func(ctx context.Context) (*serverjoin.Secrets, error) {
			state, err := readMemberState(dir)
			if err != nil {
				return nil, err
			}
			if state == nil || etcdClient == nil {
				return nil, apierrors.NewBadRequest("this server's etcd is not a cluster of servers: start the first server with --cluster-init for others to join it")
			}
			files, err := sharedFiles(dir, saKeyFile)
			if err != nil {
				return nil, err
			}
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			list, err := etcdClient.MemberList(lctx)
			if err != nil {
				return nil, apierrors.NewServiceUnavailable("the etcd cluster does not answer: " + err.Error())
			}
			var urls []string
			for _, m := range list.Members {
				if !m.IsLearner {
					urls = append(urls, m.ClientURLs...)
				}
			}
			return &serverjoin.Secrets{Files: files, EtcdClientURLs: urls}, nil
		}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == serverjoin.Path {
			join.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	}), nil
}
