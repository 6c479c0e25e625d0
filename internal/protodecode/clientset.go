package protodecode

import (
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Clientset is client-go's clientset whose CoreV1 and AppsV1 clients (pods,
// replicasets, deployments, ..., the bulk of what controllers watch) decode protobuf
// through this package. Every other group is the embedded clientset's.
type Clientset struct {
	*kubernetes.Clientset
	coreV1 corev1client.CoreV1Interface
	appsV1 appsv1client.AppsV1Interface
}

var _ kubernetes.Interface = (*Clientset)(nil)

// CoreV1 is the core group's client, decoding through this package.
func (c *Clientset) CoreV1() corev1client.CoreV1Interface { return c.coreV1 }

// AppsV1 is the apps group's client, decoding through this package.
func (c *Clientset) AppsV1() appsv1client.AppsV1Interface { return c.appsV1 }

// NewForConfig is kubernetes.NewForConfig with CoreV1 and AppsV1 decoding through
// this package. All groups share one HTTP client and, as upstream, one rate limiter
// when cfg has QPS but no limiter of its own, so the requests allowed are the same.
func NewForConfig(cfg *rest.Config) (*Clientset, error) {
	c := *cfg
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	// The one limiter kubernetes.NewForConfigAndClient would make and share, made here
	// so the two groups below share it too. Without a burst it reports the error.
	if c.RateLimiter == nil && c.QPS > 0 && c.Burst > 0 {
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	httpClient, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfigAndClient(&c, httpClient)
	if err != nil {
		return nil, err
	}
	serializer := NegotiatedSerializer()
	core, err := restClient(c, httpClient, serializer, corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	apps, err := restClient(c, httpClient, serializer, appsv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &Clientset{Clientset: cs, coreV1: corev1client.New(core), appsV1: appsv1client.New(apps)}, nil
}

// restClient is the REST client a generated client of gv would make from cfg, with
// serializer in place of client-go's.
func restClient(cfg rest.Config, httpClient *http.Client, serializer runtime.NegotiatedSerializer, gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
	cfg.GroupVersion = &gv
	cfg.APIPath = apiPath
	cfg.NegotiatedSerializer = serializer
	return rest.RESTClientForConfigAndClient(&cfg, httpClient)
}
