package podautoscaler

import (
	"context"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/clock"
)

// NewForConfig builds the controller with the clients it needs from cfg: a scale
// client and a RESTMapper read from discovery (reset when a kind is not found, so a
// CRD added later can be a target), and the three metrics clients. Which custom
// metrics API version to use is read again every sync period.
func NewForConfig(ctx context.Context, cfg *rest.Config, client kubernetes.Interface, f informers.SharedInformerFactory, opts Options) (*Controller, error) {
	opts = opts.withDefaults()
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disc))
	if err != nil {
		return nil, err
	}
	resourceMetrics, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	available := custom_metrics.NewAvailableAPIsGetter(disc)
	go custom_metrics.PeriodicallyInvalidate(available, opts.SyncPeriod, ctx.Done())
	external, err := external_metrics.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	metrics := NewMetricsClient(resourceMetrics.MetricsV1beta1(), custom_metrics.NewForConfig(cfg, mapper, available), external)
	return New(client, f.Autoscaling().V2().HorizontalPodAutoscalers(), f.Core().V1().Pods(), scales, mapper, metrics, opts, clock.RealClock{}), nil
}
