// Package podautoscaler is the Horizontal Pod Autoscaler controller
// (horizontal-pod-autoscaler-controller): every sync period it reads each HPA's
// target through the scale subresource of whatever kind it names, reads the metrics
// the HPA targets (metrics.k8s.io for Resource and ContainerResource,
// custom.metrics.k8s.io for Pods and Object, external.metrics.k8s.io for External),
// computes a replica count with upstream's rules (tolerance, missing and unready pods,
// the CPU initialization period), applies min/max and the behavior's stabilization
// windows and rate policies, writes the scale, and reports status, conditions and
// events as upstream's controller does.
package podautoscaler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	autoscalinginformers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

// Name is the controller's component name, as its events show it.
const Name = "horizontal-pod-autoscaler"

// Options are the controller-manager flags of the HPA, with upstream's defaults.
type Options struct {
	// SyncPeriod: how often each HPA is reconciled (--horizontal-pod-autoscaler-sync-period, 15s).
	SyncPeriod time.Duration
	// Tolerance: the usage ratio's dead band around 1 (--horizontal-pod-autoscaler-tolerance, 0.1).
	Tolerance float64
	// DownscaleStabilization: the window of HPAs without behavior (5m).
	DownscaleStabilization time.Duration
	// CPUInitializationPeriod (5m) and InitialReadinessDelay (30s): see calculator.
	CPUInitializationPeriod time.Duration
	InitialReadinessDelay   time.Duration
}

func (o Options) withDefaults() Options {
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = 15 * time.Second
	}
	if o.Tolerance <= 0 {
		o.Tolerance = 0.1
	}
	if o.DownscaleStabilization <= 0 {
		o.DownscaleStabilization = defaultDownscaleStabilization
	}
	if o.CPUInitializationPeriod <= 0 {
		o.CPUInitializationPeriod = 5 * time.Minute
	}
	if o.InitialReadinessDelay <= 0 {
		o.InitialReadinessDelay = 30 * time.Second
	}
	return o
}

// Controller is the HPA controller.
type Controller struct {
	client   kubernetes.Interface
	hpas     autoscalinglisters.HorizontalPodAutoscalerLister
	pods     corelisters.PodLister
	synced   []cache.InformerSynced
	scales   scale.ScalesGetter
	mapper   meta.RESTMapper
	metrics  MetricsClient
	events   *util.Events
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
	clock    clock.Clock
	opts     Options
	calc     *calculator
	history  *history
}

// New returns the controller. mapper maps a scale target's kind to its resource (a
// discovery-backed mapper, so custom resources with a scale subresource work too).
func New(client kubernetes.Interface, hpaInformer autoscalinginformers.HorizontalPodAutoscalerInformer,
	podInformer coreinformers.PodInformer, scales scale.ScalesGetter, mapper meta.RESTMapper,
	metrics MetricsClient, opts Options, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	opts = opts.withDefaults()
	events := util.NewEvents(client, Name)
	c := &Controller{
		client: client, hpas: hpaInformer.Lister(), pods: podInformer.Lister(),
		synced: []cache.InformerSynced{hpaInformer.Informer().HasSynced, podInformer.Informer().HasSynced},
		scales: scales, mapper: mapper, metrics: metrics,
		events: events, recorder: events.EventRecorder,
		queue: util.NewQueue("horizontalpodautoscaler"),
		clock: clk, opts: opts,
		calc: &calculator{
			tolerance:                     tolerances{opts.Tolerance, opts.Tolerance},
			cpuInitializationPeriod:       opts.CPUInitializationPeriod,
			delayOfInitialReadinessStatus: opts.InitialReadinessDelay,
			now:                           clk.Now,
		},
		history: newHistory(),
	}
	hpaInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(old, cur any) {
			// Our own status writes come back here; only a new spec is worth a sync
			// before the period is up.
			o, n := old.(*autoscalingv2.HorizontalPodAutoscaler), cur.(*autoscalingv2.HorizontalPodAutoscaler)
			if !apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
				util.Enqueue(c.queue, cur)
			}
		},
		DeleteFunc: func(obj any) { util.Enqueue(c.queue, obj) },
	})
	return c
}

// Run starts the workers in the background.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunWorkers(ctx, "horizontal-pod-autoscaler", c.queue, workers, c.Sync, c.synced...)
}

// Sync reconciles the HPA named by key and asks to be called again after the sync
// period, whatever happened: metrics change without any event.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	hpa, err := c.hpas.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.history.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.reconcile(ctx, key, hpa.DeepCopy()); err != nil {
		slog.InfoContext(ctx, "horizontal pod autoscaler", "hpa", key, "err", err)
	}
	return util.RequeueAfter(c.opts.SyncPeriod, "sync period")
}

// reconcile is one pass over an HPA (upstream's reconcileAutoscaler).
func (c *Controller) reconcile(ctx context.Context, key string, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	original := hpa.Status.DeepCopy()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)
	now := c.clock.Now()

	failedGetScale := func(err error, wrapped error) error {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err, now)
		if uerr := c.updateStatusIfNeeded(ctx, original, hpa); uerr != nil {
			return uerr
		}
		return wrapped
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return failedGetScale(err, fmt.Errorf("invalid API version in scale target reference: %v", err))
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	mappings, err := c.mapper.RESTMappings(gk)
	if r, ok := c.mapper.(meta.ResettableRESTMapper); ok && err != nil {
		// A kind that appeared since discovery was last read (a new CRD's): read
		// discovery again and look once more.
		r.Reset()
		mappings, err = c.mapper.RESTMappings(gk)
	}
	if err != nil {
		return failedGetScale(err, fmt.Errorf("unable to determine resource for scale target reference: %v", err))
	}
	sc, targetGR, err := c.scaleFor(ctx, hpa.Namespace, ref.Name, mappings)
	if err != nil {
		return failedGetScale(err, fmt.Errorf("failed to query scale subresource for %s: %v", reference, err))
	}
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale", nil, now)

	current := sc.Spec.Replicas
	c.history.initialRecommendation(key, current, now)
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	var (
		desired       int32
		rescaleReason string
		statuses      []autoscalingv2.MetricStatus
		rescale       bool
	)
	switch {
	case current == 0 && minReplicas != 0:
		// Scaled to zero by hand: the HPA stands aside until someone scales it up.
		desired = 0
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero", nil, now)
	case current > hpa.Spec.MaxReplicas:
		rescaleReason, desired = "Current number of replicas above Spec.MaxReplicas", hpa.Spec.MaxReplicas
	case current < minReplicas:
		rescaleReason, desired = "Current number of replicas below Spec.MinReplicas", minReplicas
	default:
		proposal, metricName, st, err := c.computeReplicasForMetrics(ctx, hpa, sc, now)
		statuses = st
		if err != nil && proposal == -1 {
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			if uerr := c.updateStatusIfNeeded(ctx, original, hpa); uerr != nil {
				return uerr
			}
			c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %v", reference, err)
		}
		var rescaleMetric string
		if proposal > desired {
			desired, rescaleMetric = proposal, metricName
		}
		if desired > current {
			rescaleReason = fmt.Sprintf("%s above target", rescaleMetric)
		}
		if desired < current {
			rescaleReason = "All metrics below target"
		}
		if hpa.Spec.Behavior == nil {
			desired = c.normalize(key, hpa, current, desired, minReplicas, now)
		} else {
			desired = c.normalizeWithBehavior(key, hpa, current, desired, minReplicas, now)
		}
	}
	rescale = desired != current

	if rescale {
		sc.Spec.Replicas = desired
		if _, err := c.scales.Scales(hpa.Namespace).Update(ctx, targetGR, sc, metav1.UpdateOptions{}); err != nil {
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, rescaleReason, err.Error())
			setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err, now)
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			if uerr := c.updateStatusIfNeeded(ctx, original, hpa); uerr != nil {
				return uerr
			}
			return fmt.Errorf("failed to rescale %s: %v", reference, err)
		}
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired, now)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, rescaleReason)
		c.history.storeScale(key, hpa.Spec.Behavior, current, desired, now)
		slog.InfoContext(ctx, "successful rescale", "hpa", key, "currentReplicas", current, "desiredReplicas", desired, "reason", rescaleReason)
	}
	c.setStatus(hpa, current, desired, statuses, rescale, now)
	return c.updateStatusIfNeeded(ctx, original, hpa)
}

// scaleFor reads the Scale of the first mapping that serves one.
func (c *Controller) scaleFor(ctx context.Context, ns, name string, mappings []*meta.RESTMapping) (*autoscalingv1.Scale, schema.GroupResource, error) {
	var firstErr error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		s, err := c.scales.Scales(ns).Get(ctx, gr, name, metav1.GetOptions{})
		if err == nil {
			return s, gr, nil
		}
		if i == 0 {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("unrecognized resource")
	}
	return nil, schema.GroupResource{}, firstErr
}

// normalize applies the downscale window, min/max and the fixed scale-up rate to an
// HPA without behavior.
func (c *Controller) normalize(key string, hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired, minReplicas int32, now time.Time) int32 {
	stabilized := c.history.stabilize(key, desired, now, c.opts.DownscaleStabilization)
	if stabilized != desired {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation", nil, now)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size", nil, now)
	}
	r := limitWithoutBehavior(current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	c.setLimited(hpa, r, stabilized, now)
	return r.replicas
}

// normalizeWithBehavior applies the behavior's windows and policies and min/max.
func (c *Controller) normalizeWithBehavior(key string, hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired, minReplicas int32, now time.Time) int32 {
	b := hpa.Spec.Behavior
	if b.ScaleDown != nil && b.ScaleDown.StabilizationWindowSeconds == nil {
		w := int32(c.opts.DownscaleStabilization / time.Second)
		b.ScaleDown.StabilizationWindowSeconds = &w
	}
	stabilized, reason, message := c.history.stabilizeWithBehavior(key, current, desired, b.ScaleUp, b.ScaleDown, now)
	if stabilized != desired {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, reason, message, nil, now)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size", nil, now)
	}
	r := c.history.limitWithBehavior(key, current, stabilized, minReplicas, hpa.Spec.MaxReplicas, b, now)
	c.setLimited(hpa, r, stabilized, now)
	return r.replicas
}

func (c *Controller) setLimited(hpa *autoscalingv2.HorizontalPodAutoscaler, r limitResult, stabilized int32, now time.Time) {
	status := corev1.ConditionFalse
	if r.replicas != stabilized {
		status = corev1.ConditionTrue
	}
	setCondition(hpa, autoscalingv2.ScalingLimited, status, r.reason, r.message, nil, now)
}

// setStatus fills the status as upstream's setStatus does; lastScaleTime moves only on
// a rescale.
func (c *Controller) setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, statuses []autoscalingv2.MetricStatus, rescale bool, now time.Time) {
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: current,
		DesiredReplicas: desired,
		CurrentMetrics:  statuses,
		LastScaleTime:   hpa.Status.LastScaleTime,
		Conditions:      hpa.Status.Conditions,
	}
	if rescale {
		t := metav1.NewTime(now)
		hpa.Status.LastScaleTime = &t
	}
}

func (c *Controller) updateStatusIfNeeded(ctx context.Context, original *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(original, &hpa.Status) {
		return nil
	}
	if _, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %v", hpa.Name, err)
	}
	return nil
}

// setCondition sets a condition, keeping its transition time while its status holds.
// message is a format when arg is not nil.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType,
	status corev1.ConditionStatus, reason, message string, arg any, now time.Time) {
	if arg != nil {
		message = fmt.Sprintf(message, arg)
	}
	conds := hpa.Status.Conditions
	for i := range conds {
		if conds[i].Type != t {
			continue
		}
		if conds[i].Status != status {
			conds[i].LastTransitionTime = metav1.NewTime(now)
		}
		conds[i].Status, conds[i].Reason, conds[i].Message = status, reason, message
		return
	}
	hpa.Status.Conditions = append(conds, autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now),
	})
}
