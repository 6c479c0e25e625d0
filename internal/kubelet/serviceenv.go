package kubelet

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// masterServiceEnv is the environment every container gets for the "kubernetes"
// Service in the default namespace (KUBERNETES_SERVICE_HOST and the rest), whatever
// its enableServiceLinks, as upstream's kubelet gives it: with the token and CA of the
// kube-api-access volume it is what client-go's rest.InClusterConfig reads. A missing
// Service yields none.
func (kl *Kubelet) masterServiceEnv(ctx context.Context) [][2]string {
	obj, err := kl.volumeSources.objects.get("services/default/kubernetes", func() (any, error) {
		return kl.client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	})
	if err != nil {
		return nil
	}
	return serviceEnv(obj.(*v1.Service))
}

// serviceEnv is the Docker-links style environment of one Service with a cluster IP.
func serviceEnv(svc *v1.Service) [][2]string {
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == v1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return nil
	}
	prefix := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_"))
	first := svc.Spec.Ports[0]
	out := [][2]string{
		{prefix + "_SERVICE_HOST", ip},
		{prefix + "_SERVICE_PORT", strconv.Itoa(int(first.Port))},
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			out = append(out, [2]string{prefix + "_SERVICE_PORT_" + strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), strconv.Itoa(int(p.Port))})
		}
	}
	url := func(p v1.ServicePort) string {
		return fmt.Sprintf("%s://%s:%d", strings.ToLower(string(p.Protocol)), ip, p.Port)
	}
	out = append(out, [2]string{prefix + "_PORT", url(first)})
	for _, p := range svc.Spec.Ports {
		key := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(string(p.Protocol)))
		out = append(out,
			[2]string{key, url(p)},
			[2]string{key + "_PROTO", strings.ToLower(string(p.Protocol))},
			[2]string{key + "_PORT", strconv.Itoa(int(p.Port))},
			[2]string{key + "_ADDR", ip},
		)
	}
	return out
}
