package core

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/datadir"
	"mizzen/internal/serverjoin"
)

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
