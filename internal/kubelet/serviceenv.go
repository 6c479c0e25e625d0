package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// masterServiceName is the Service in the default namespace whose variables every
// container gets, whatever its pod's enableServiceLinks: with the token and CA of the
// kube-api-access volume, KUBERNETES_SERVICE_HOST and _PORT are what client-go's
// rest.InClusterConfig reads.
const masterServiceName = "kubernetes"

// serviceSyncTimeout bounds how long a container start waits for the first list of
// Services, so that a kubelet that has just started does not give a container an
// environment missing its service variables. The list is network time, so the wait is
// in real time rather than on the kubelet's clock.
const serviceSyncTimeout = 10 * time.Second

// errServicesNotSynced fails a container start whose service variables cannot be known
// yet; the start is retried, as upstream's kubelet does.
var errServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")

// podServiceEnv is the Docker-links style environment of the Services a pod's
// containers see, in a stable order: those of the pod's own namespace when
// spec.enableServiceLinks is true or unset, and always the default namespace's
// "kubernetes" Service unless the pod's namespace has a Service of that name of its own.
// Services without a cluster IP (headless, ExternalName) give none.
func (kl *Kubelet) podServiceEnv(ctx context.Context, pod *v1.Pod) ([][2]string, error) {
	if kl.services == nil {
		return nil, nil // no API to read Services from
	}
	if !isStaticPod(pod) && !kl.waitForServices(ctx) {
		// Static pods may run before any apiserver exists, so they take what is known.
		return nil, errServicesNotSynced
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	return linkedServicesEnv(kl.services, pod.Namespace, links)
}

// linkedServicesEnv selects the Services a pod in namespace ns sees and renders their
// variables, Services in name order.
func linkedServicesEnv(lister corelisters.ServiceLister, ns string, links bool) ([][2]string, error) {
	byName := map[string]*v1.Service{}
	if master, err := lister.Services(metav1.NamespaceDefault).Get(masterServiceName); err == nil && hasClusterIP(master) {
		byName[masterServiceName] = master
	}
	if links {
		local, err := lister.Services(ns).List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing services for environment variables: %w", err)
		}
		for _, svc := range local {
			if hasClusterIP(svc) {
				byName[svc.Name] = svc // the pod's own namespace wins over default's
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	var out [][2]string
	for _, name := range names {
		out = append(out, serviceEnv(byName[name])...)
	}
	return out, nil
}

// waitForServices reports whether the Service informer has listed once, waiting a
// bounded time for it.
func (kl *Kubelet) waitForServices(ctx context.Context) bool {
	if kl.servicesSynced() {
		return true
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, serviceSyncTimeout, true,
		func(context.Context) (bool, error) { return kl.servicesSynced(), nil })
	return err == nil
}

// isStaticPod reports whether a pod came from a manifest file rather than the API.
func isStaticPod(pod *v1.Pod) bool {
	src, ok := pod.Annotations[annoConfigSource]
	return ok && src != "api"
}

// hasClusterIP reports whether a Service has a virtual IP: headless (None) and
// ExternalName (empty) Services do not.
func hasClusterIP(svc *v1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone
}

// envName turns a Service or port name into a variable name part.
func envName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// serviceEnv is the Docker-links style environment of one Service with a cluster IP:
// NAME_SERVICE_HOST and _PORT (the first port), _SERVICE_PORT_<PORTNAME> for each named
// port, and the NAME_PORT_<port>_<PROTO> family for every port.
func serviceEnv(svc *v1.Service) [][2]string {
	ip := svc.Spec.ClusterIP
	if !hasClusterIP(svc) || len(svc.Spec.Ports) == 0 {
		return nil
	}
	prefix := envName(svc.Name)
	first := svc.Spec.Ports[0]
	out := [][2]string{
		{prefix + "_SERVICE_HOST", ip},
		{prefix + "_SERVICE_PORT", strconv.Itoa(int(first.Port))},
	}
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			out = append(out, [2]string{prefix + "_SERVICE_PORT_" + envName(p.Name), strconv.Itoa(int(p.Port))})
		}
	}
	for i, p := range svc.Spec.Ports {
		proto := strings.ToLower(string(p.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		port := strconv.Itoa(int(p.Port))
		url := proto + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			out = append(out, [2]string{prefix + "_PORT", url})
		}
		key := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		out = append(out,
			[2]string{key, url},
			[2]string{key + "_PROTO", proto},
			[2]string{key + "_PORT", port},
			[2]string{key + "_ADDR", ip},
		)
	}
	return out
}
