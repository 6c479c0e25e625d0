package eviction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Reclaimer frees node-level disk space (unused images, dead containers) before pods
// are evicted for disk pressure.
type Reclaimer interface {
	Reclaim(ctx context.Context) error
}

// PressureOptions configure a Pressure manager. Thresholds may be empty (no
// pressure is ever reported); Measurer, Pods, Evict and Clock are required.
type PressureOptions struct {
	Thresholds []Threshold
	// MaxPodGracePeriodSeconds caps the grace period of pods evicted for a soft
	// threshold: the smaller of it and the pod's own; negative leaves the pod's own.
	MaxPodGracePeriodSeconds int64
	// TransitionPeriod is how long a pressure condition stays True after its
	// threshold was last met; DefaultPressureTransitionPeriod when zero.
	TransitionPeriod time.Duration
	Measurer         Measurer
	// Reclaimer, if set, is tried before pods are evicted for disk pressure.
	Reclaimer Reclaimer
	// Pods lists the node's pods that may be evicted: admitted, not terminal, not
	// being deleted.
	Pods func() []*v1.Pod
	// Evict fails and kills the pod with the grace period and upstream's message; it
	// must not block for long.
	Evict func(pod *v1.Pod, gracePeriodSeconds int64, message string)
	// Period is how often the node is measured; 10s when zero, as upstream.
	Period time.Duration
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Pressure is upstream's node-pressure eviction manager: it measures the node
// periodically, reports MemoryPressure, DiskPressure and PIDPressure while a threshold
// is met (and for the transition period after), refuses new pods under pressure, and
// evicts one pod per period while a threshold (a soft one past its grace period) is
// met.
type Pressure struct {
	opts PressureOptions

	mu sync.RWMutex
	// conditions are the pressure conditions reported now, in a fixed order.
	conditions []v1.NodeConditionType

	// Owned by Sync (one at a time):
	// metSince is when each threshold currently met was first seen met.
	metSince map[thresholdKey]time.Time
	// conditionSeen is when each condition's threshold was last met.
	conditionSeen map[v1.NodeConditionType]time.Time
	// acting are the thresholds met past their grace period at the last sync; they
	// stay met until their minimum reclaim is satisfied.
	acting []Threshold
}

type thresholdKey struct {
	signal Signal
	soft   bool
}

// NewPressure returns a Pressure manager; Run starts it.
func NewPressure(opts PressureOptions) (*Pressure, error) {
	if opts.Measurer == nil || opts.Pods == nil || opts.Evict == nil || opts.Clock == nil {
		return nil, errors.New("eviction: Measurer, Pods, Evict and Clock are required")
	}
	if opts.Period <= 0 {
		opts.Period = 10 * time.Second
	}
	if opts.TransitionPeriod <= 0 {
		opts.TransitionPeriod = DefaultPressureTransitionPeriod
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Pressure{opts: opts, metSince: map[thresholdKey]time.Time{}, conditionSeen: map[v1.NodeConditionType]time.Time{}}, nil
}

// Run measures now, as upstream's manager does when it starts, then every Period
// until ctx ends.
func (p *Pressure) Run(ctx context.Context) {
	t := p.opts.Clock.NewTicker(p.opts.Period)
	defer t.Stop()
	for {
		p.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Conditions returns the pressure conditions that are True now.
func (p *Pressure) Conditions() []v1.NodeConditionType {
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.conditions)
}

// Admit decides whether a new pod may start under the current pressure, as upstream's
// eviction admission does: critical pods always; under memory pressure alone, any pod
// but a BestEffort one that does not tolerate the memory-pressure taint; under any
// other pressure, none. It returns the rejection reason and message, or "".
func (p *Pressure) Admit(pod *v1.Pod) (string, string) {
	conds := p.Conditions()
	if len(conds) == 0 || isCritical(pod) {
		return "", ""
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if podQOS(pod) != v1.PodQOSBestEffort || toleratesMemoryPressure(pod) {
			return "", ""
		}
	}
	return Reason, fmt.Sprintf("The node was low on resource: %v. ", conds)
}

// Sync measures the node once, updates the conditions, and evicts at most one pod.
func (p *Pressure) Sync(ctx context.Context) {
	node, err := p.opts.Measurer.Node(ctx)
	if err != nil {
		p.opts.Logger.Error("eviction: measuring the node", "err", err)
		return
	}
	obs := node.observations()
	now := p.opts.Clock.Now()
	met := p.observeThresholds(obs, now)
	p.updateConditions(met, now)

	var acting []Threshold
	for _, t := range met {
		if now.Sub(p.metSince[keyOf(t)]) >= t.GracePeriod {
			acting = append(acting, t)
		}
	}
	p.acting = acting
	if len(acting) == 0 {
		return
	}
	// Memory first, then the other signals in their listed order; hard before soft.
	slices.SortStableFunc(acting, func(a, b Threshold) int {
		return slices.Index(signals, a.Signal) - slices.Index(signals, b.Signal)
	})
	t := acting[0]
	if t.Signal.isDisk() && p.opts.Reclaimer != nil {
		var relieved bool
		if obs, relieved = p.reclaim(ctx, obs); relieved {
			return
		}
	}
	p.evictOne(ctx, t, obs)
}

func keyOf(t Threshold) thresholdKey { return thresholdKey{t.Signal, t.Soft} }

// observeThresholds returns the thresholds the observations meet, with those acted on at
// the last sync until their minimum reclaim is satisfied, and records since when each
// has been met.
func (p *Pressure) observeThresholds(obs map[Signal]Observation, now time.Time) []Threshold {
	met := thresholdsMet(p.opts.Thresholds, obs, false)
	for _, t := range thresholdsMet(p.acting, obs, true) {
		if !slices.ContainsFunc(met, func(m Threshold) bool { return keyOf(m) == keyOf(t) }) {
			met = append(met, t)
		}
	}
	since := make(map[thresholdKey]time.Time, len(met))
	for _, t := range met {
		first, ok := p.metSince[keyOf(t)]
		if !ok {
			first = now
		}
		since[keyOf(t)] = first
	}
	p.metSince = since
	return met
}

// updateConditions reports a pressure condition while one of its thresholds is met,
// grace period or not, and for the transition period after.
func (p *Pressure) updateConditions(met []Threshold, now time.Time) {
	for _, t := range met {
		p.conditionSeen[t.Signal.condition()] = now
	}
	var conds []v1.NodeConditionType
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		seen, ok := p.conditionSeen[c]
		switch {
		case !ok:
		case now.Sub(seen) < p.opts.TransitionPeriod:
			conds = append(conds, c)
		default:
			delete(p.conditionSeen, c)
		}
	}
	p.mu.Lock()
	changed := !slices.Equal(conds, p.conditions)
	p.conditions = conds
	p.mu.Unlock()
	if changed {
		p.opts.Logger.Info("eviction: node pressure", "conditions", conds)
	}
}

// reclaim frees node-level disk space and measures again. relieved reports whether
// that met every threshold's minimum reclaim, so that no pod need go; obs are the new
// observations (the old ones if the node could not be measured).
func (p *Pressure) reclaim(ctx context.Context, old map[Signal]Observation) (obs map[Signal]Observation, relieved bool) {
	if err := p.opts.Reclaimer.Reclaim(ctx); err != nil {
		p.opts.Logger.Error("eviction: reclaiming node-level disk space", "err", err)
	}
	node, err := p.opts.Measurer.Node(ctx)
	if err != nil {
		p.opts.Logger.Error("eviction: measuring the node", "err", err)
		return old, false
	}
	obs = node.observations()
	if len(thresholdsMet(p.opts.Thresholds, obs, true)) == 0 {
		p.opts.Logger.Info("eviction: node-level reclaim relieved the pressure; no pod evicted")
		return obs, true
	}
	return obs, false
}

// evictOne evicts the first pod in rank for the threshold that is not critical.
func (p *Pressure) evictOne(ctx context.Context, t Threshold, obs map[Signal]Observation) {
	pods := slices.Clone(p.opts.Pods())
	if len(pods) == 0 {
		p.opts.Logger.Info("eviction: threshold met but no pod to evict", "signal", t.Signal)
		return
	}
	stats, err := p.opts.Measurer.Pods(ctx, pods)
	if err != nil {
		p.opts.Logger.Error("eviction: measuring pods", "err", err)
		return
	}
	rank(t.Signal, pods, stats)
	for _, pod := range pods {
		if isCritical(pod) {
			continue // upstream never evicts a static, mirror or system-critical pod
		}
		s, measured := stats[pod.UID]
		msg := evictionMessage(t, obs[t.Signal], pod, s, measured)
		grace := p.gracePeriod(t, pod)
		p.opts.Logger.Info("eviction: evicting pod for node pressure", "pod", pod.Namespace+"/"+pod.Name,
			"signal", t.Signal, "gracePeriod", grace, "message", msg)
		p.opts.Evict(pod, grace, msg)
		return
	}
	p.opts.Logger.Info("eviction: threshold met but only critical pods run", "signal", t.Signal)
}

// gracePeriod is the pod's grace period when evicted for the threshold: upstream's
// short immediate one for a hard threshold; for a soft one the smaller of the pod's
// own and the configured maximum.
func (p *Pressure) gracePeriod(t Threshold, pod *v1.Pod) int64 {
	if !t.Soft {
		return GracePeriodSeconds
	}
	own := int64(v1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		own = *pod.Spec.TerminationGracePeriodSeconds
	}
	if maxGrace := p.opts.MaxPodGracePeriodSeconds; maxGrace >= 0 && maxGrace < own {
		return maxGrace
	}
	return own
}

// evictionMessage is upstream's message for a pod evicted for the threshold: the
// resource, the threshold and what is available, then each container using more of
// the resource than it requests.
func evictionMessage(t Threshold, o Observation, pod *v1.Pod, s PodStats, measured bool) string {
	res := t.Signal.resource()
	msg := fmt.Sprintf("The node was low on resource: %v. ", res)
	threshold := t.Value.Quantity
	if threshold == nil {
		threshold = t.Signal.quantity(t.Value.of(o.Capacity))
	}
	msg += fmt.Sprintf("Threshold quantity: %v, available: %v. ", threshold, t.Signal.quantity(o.Available))
	if !measured {
		return msg
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for _, cs := range s.Containers {
			if cs.Name != c.Name {
				continue
			}
			used, ok := containerUsage(res, cs)
			if !ok {
				continue
			}
			request := c.Resources.Requests[res]
			usage := t.Signal.quantity(used)
			if usage.Cmp(request) > 0 {
				msg += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ", c.Name, usage.String(), request.String(), res)
			}
		}
	}
	return msg
}

// podQOS is the pod's QoS class as the apiserver recorded it, or computed from its
// containers' requests and limits as upstream does.
func podQOS(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	requested, guaranteed := false, true
	all := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	for _, c := range all {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq && !req.IsZero() || hasLim && !lim.IsZero() {
				requested = true
			}
			if !hasLim || lim.IsZero() || hasReq && req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !requested:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// toleratesMemoryPressure reports whether the pod tolerates the memory-pressure
// NoSchedule taint the node gets under memory pressure.
func toleratesMemoryPressure(pod *v1.Pod) bool {
	taint := v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
	for i := range pod.Spec.Tolerations {
		tol := &pod.Spec.Tolerations[i]
		if tol.Effect != "" && tol.Effect != taint.Effect {
			continue
		}
		if tol.Key == "" && tol.Operator == v1.TolerationOpExists || tol.Key == taint.Key &&
			(tol.Operator == v1.TolerationOpExists || (tol.Operator == "" || tol.Operator == v1.TolerationOpEqual) && tol.Value == "") {
			return true
		}
	}
	return false
}
