package podautoscaler

import (
	"math"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// defaultDownscaleStabilization is the window over which an HPA without behavior
// keeps the highest recent recommendation (--horizontal-pod-autoscaler-downscale-stabilization).
const defaultDownscaleStabilization = 5 * time.Minute

type recommendation struct {
	replicas int32
	at       time.Time
}

type scaleEvent struct {
	change   int32
	at       time.Time
	outdated bool
}

// history is what the controller remembers about each HPA between syncs: the
// recommendations it made (for stabilization windows) and the scalings it did (for
// rate policies). It lives in memory, as upstream's does: after a restart the windows
// start empty.
type history struct {
	mu              sync.Mutex
	recommendations map[string][]recommendation
	scaleUps        map[string][]scaleEvent
	scaleDowns      map[string][]scaleEvent
}

func newHistory() *history {
	return &history{recommendations: map[string][]recommendation{}, scaleUps: map[string][]scaleEvent{}, scaleDowns: map[string][]scaleEvent{}}
}

func (h *history) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.recommendations, key)
	delete(h.scaleUps, key)
	delete(h.scaleDowns, key)
}

// initialRecommendation seeds an HPA's recommendations with the current count, so
// that a controller just started does not scale down before a window has passed.
func (h *history) initialRecommendation(key string, current int32, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recommendations[key] == nil {
		h.recommendations[key] = []recommendation{{current, now}}
	}
}

// record adds rec to key's recommendations, in place of one older than keep if there
// is one, so the list stays as long as the window needs.
func (h *history) record(key string, rec recommendation, keep time.Duration) {
	cutoff := rec.at.Add(-keep)
	for i, r := range h.recommendations[key] {
		if r.at.Before(cutoff) {
			h.recommendations[key][i] = rec
			return
		}
	}
	h.recommendations[key] = append(h.recommendations[key], rec)
}

// stabilize is the recommendation of an HPA without behavior: the highest within the
// downscale window, so a dip in load does not scale down at once.
func (h *history) stabilize(key string, desired int32, now time.Time, window time.Duration) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	best := desired
	cutoff := now.Add(-window)
	for _, r := range h.recommendations[key] {
		if !r.at.Before(cutoff) && r.replicas > best {
			best = r.replicas
		}
	}
	h.record(key, recommendation{desired, now}, window)
	return best
}

// stabilizeWithBehavior applies the stabilization window of the direction the
// recommendation points: scaling up takes the lowest recommendation within the
// scale-up window, scaling down the highest within the scale-down window. It returns
// the condition reason and message for when that changed the recommendation.
func (h *history) stabilizeWithBehavior(key string, current, desired int32, up, down *autoscalingv2.HPAScalingRules, now time.Time) (int32, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	upWindow, downWindow := windowOf(up), windowOf(down)
	result := desired
	var window time.Duration
	var better func(a, b int32) int32
	var reason, message string
	if desired >= current {
		window, better = upWindow, func(a, b int32) int32 { return min(a, b) }
		reason, message = "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	} else {
		window, better = downWindow, func(a, b int32) int32 { return max(a, b) }
		reason, message = "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
	}
	cutoff := now.Add(-window)
	for _, r := range h.recommendations[key] {
		if r.at.After(cutoff) {
			result = better(r.replicas, result)
		}
	}
	h.record(key, recommendation{desired, now}, max(upWindow, downWindow))
	return result, reason, message
}

func windowOf(r *autoscalingv2.HPAScalingRules) time.Duration {
	if r == nil || r.StabilizationWindowSeconds == nil {
		return 0
	}
	return time.Duration(*r.StabilizationWindowSeconds) * time.Second
}

// changeIn sums the replica changes of events within the last period.
func changeIn(period int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(period) * time.Second)
	var sum int32
	for _, e := range events {
		if e.at.After(cutoff) {
			sum += e.change
		}
	}
	return sum
}

// scaleUpLimit is the most replicas the scale-up policies allow now.
func (h *history) scaleUpLimit(key string, current int32, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	return h.policyLimit(key, current, rules, now, +1)
}

// scaleDownLimit is the fewest replicas the scale-down policies allow now.
func (h *history) scaleDownLimit(key string, current int32, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	return h.policyLimit(key, current, rules, now, -1)
}

// policyLimit is the furthest the policies of one direction (+1 up, -1 down) let the
// replica count go now: each policy measures from the replica count at the start of
// its period; selectPolicy Max picks the policy allowing the biggest change, Min the
// smallest, Disabled none (stay at current). Without rules the direction is unlimited.
func (h *history) policyLimit(key string, current int32, rules *autoscalingv2.HPAScalingRules, now time.Time, direction int32) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	furthest, nearest := func(a, b int32) int32 { return max(a, b) }, func(a, b int32) int32 { return min(a, b) }
	unlimited, result := int32(math.MaxInt32), int32(math.MinInt32)
	if direction < 0 {
		furthest, nearest = nearest, furthest
		unlimited, result = result, unlimited
	}
	if rules == nil {
		return unlimited
	}
	policy := selectPolicy(rules)
	if policy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	pick := furthest
	if policy == autoscalingv2.MinChangePolicySelect {
		result, pick = unlimited, nearest
	}
	for _, p := range rules.Policies {
		start := current - changeIn(p.PeriodSeconds, h.scaleUps[key], now) + changeIn(p.PeriodSeconds, h.scaleDowns[key], now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start + direction*p.Value
		case autoscalingv2.PercentScalingPolicy:
			factor := float64(start) * (1 + float64(direction*p.Value)/100)
			if direction > 0 {
				proposed = int32(math.Ceil(factor))
			} else {
				proposed = int32(factor)
			}
		}
		result = pick(result, proposed)
	}
	return result
}

func selectPolicy(r *autoscalingv2.HPAScalingRules) autoscalingv2.ScalingPolicySelect {
	if r.SelectPolicy == nil {
		return autoscalingv2.MaxChangePolicySelect
	}
	return *r.SelectPolicy
}

// storeScale remembers a scaling from prev to next for the rate policies, reusing an
// event older than the direction's longest policy period.
func (h *history) storeScale(key string, behavior *autoscalingv2.HorizontalPodAutoscalerBehavior, prev, next int32, now time.Time) {
	if behavior == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	events, rules, change := h.scaleUps, behavior.ScaleUp, next-prev
	if next < prev {
		events, rules, change = h.scaleDowns, behavior.ScaleDown, prev-next
	}
	var longest int32
	if rules != nil {
		for _, p := range rules.Policies {
			longest = max(longest, p.PeriodSeconds)
		}
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	list := events[key]
	for i := range list {
		if list[i].at.Before(cutoff) {
			list[i].outdated = true
		}
	}
	e := scaleEvent{change: change, at: now}
	for i := range list {
		if list[i].outdated {
			list[i] = e
			events[key] = list
			return
		}
	}
	events[key] = append(list, e)
}

// limitResult is a replica count after the limits, with the ScalingLimited reason and
// message that goes with it.
type limitResult struct {
	replicas        int32
	reason, message string
}

const (
	withinRange        = "DesiredWithinRange"
	withinRangeMessage = "the desired count is within the acceptable range"
)

// limitWithoutBehavior applies minReplicas, maxReplicas and upstream's fixed scale-up
// rate (at most double, or to 4) for HPAs without behavior.
func limitWithoutBehavior(current, desired, minReplicas, maxReplicas int32) limitResult {
	upLimit := max(2*current, 4)
	maxAllowed, maxReason, maxMessage := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if maxReplicas > upLimit {
		maxAllowed, maxReason, maxMessage = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	minAllowed, minMessage := minReplicas, "the desired replica count is less than the minimum replica count"
	if minReplicas == 0 {
		minAllowed, minMessage = 1, "the desired replica count is zero"
	}
	switch {
	case desired < minAllowed:
		return limitResult{minAllowed, "TooFewReplicas", minMessage}
	case desired > maxAllowed:
		return limitResult{maxAllowed, maxReason, maxMessage}
	}
	return limitResult{desired, withinRange, withinRangeMessage}
}

// limitWithBehavior applies minReplicas, maxReplicas and the behavior's rate policies.
func (h *history) limitWithBehavior(key string, current, desired, minReplicas, maxReplicas int32,
	behavior *autoscalingv2.HorizontalPodAutoscalerBehavior, now time.Time) limitResult {
	if desired > current {
		limit := max(h.scaleUpLimit(key, current, behavior.ScaleUp, now), current)
		allowed, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if allowed > limit {
			allowed, reason, message = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if desired > allowed {
			return limitResult{allowed, reason, message}
		}
	} else if desired < current {
		limit := min(h.scaleDownLimit(key, current, behavior.ScaleDown, now), current)
		allowed, reason, message := minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if allowed < limit {
			allowed, reason, message = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if desired < allowed {
			return limitResult{allowed, reason, message}
		}
	}
	return limitResult{desired, withinRange, withinRangeMessage}
}
