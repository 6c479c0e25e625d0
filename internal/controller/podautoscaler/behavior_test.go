package podautoscaler

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

func rules(sel autoscalingv2.ScalingPolicySelect, policies ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{SelectPolicy: &sel, Policies: policies}
}

func TestRateLimits(t *testing.T) {
	pods := autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 60}
	percent := autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 60}
	halve := autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 60}
	cases := []struct {
		name          string
		up            bool
		rules         *autoscalingv2.HPAScalingRules
		ups, downs    []scaleEvent
		current, want int32
	}{
		{name: "up Max takes the larger change", up: true, rules: rules(autoscalingv2.MaxChangePolicySelect, pods, percent), current: 10, want: 20},
		{name: "up Min takes the smaller change", up: true, rules: rules(autoscalingv2.MinChangePolicySelect, pods, percent), current: 10, want: 14},
		{name: "up counts from the start of the period", up: true, rules: rules(autoscalingv2.MaxChangePolicySelect, pods, percent),
			ups: []scaleEvent{{change: 4, at: t0.Add(-30 * time.Second)}}, current: 10, want: 12},
		{name: "up ignores scalings older than the period", up: true, rules: rules(autoscalingv2.MaxChangePolicySelect, pods),
			ups: []scaleEvent{{change: 4, at: t0.Add(-61 * time.Second)}}, current: 10, want: 14},
		{name: "up Disabled stays", up: true, rules: rules(autoscalingv2.DisabledPolicySelect, pods), current: 10, want: 10},
		{name: "down Max takes the larger change", rules: rules(autoscalingv2.MaxChangePolicySelect, pods, halve), current: 10, want: 5},
		{name: "down Min takes the smaller change", rules: rules(autoscalingv2.MinChangePolicySelect, pods, halve), current: 10, want: 6},
		{name: "down counts from the start of the period", rules: rules(autoscalingv2.MaxChangePolicySelect, halve),
			downs: []scaleEvent{{change: 4, at: t0.Add(-10 * time.Second)}}, current: 6, want: 5},
		{name: "down Disabled stays", rules: rules(autoscalingv2.DisabledPolicySelect, halve), current: 10, want: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			h.scaleUps["k"], h.scaleDowns["k"] = tc.ups, tc.downs
			var got int32
			if tc.up {
				got = h.scaleUpLimit("k", tc.current, tc.rules, t0)
			} else {
				got = h.scaleDownLimit("k", tc.current, tc.rules, t0)
			}
			if got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLimitWithoutBehavior(t *testing.T) {
	cases := []struct {
		current, desired, min, max int32
		want                       limitResult
	}{
		{2, 3, 1, 10, limitResult{3, "DesiredWithinRange", "the desired count is within the acceptable range"}},
		{2, 9, 1, 10, limitResult{4, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"}},
		{5, 20, 1, 8, limitResult{8, "TooManyReplicas", "the desired replica count is more than the maximum replica count"}},
		{5, 1, 2, 8, limitResult{2, "TooFewReplicas", "the desired replica count is less than the minimum replica count"}},
		{5, 0, 0, 8, limitResult{1, "TooFewReplicas", "the desired replica count is zero"}},
	}
	for _, tc := range cases {
		if got := limitWithoutBehavior(tc.current, tc.desired, tc.min, tc.max); got != tc.want {
			t.Errorf("current %d desired %d [%d,%d]: %+v, want %+v", tc.current, tc.desired, tc.min, tc.max, got, tc.want)
		}
	}
}

// TestStoreScaleReusesOutdatedEvents: the event list does not grow past what the
// longest period needs.
func TestStoreScaleReusesOutdatedEvents(t *testing.T) {
	h := newHistory()
	b := &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rules(autoscalingv2.MaxChangePolicySelect,
		autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 15})}
	for i := range 10 {
		h.storeScale("k", b, int32(i), int32(i+1), t0.Add(time.Duration(i)*20*time.Second))
	}
	if n := len(h.scaleUps["k"]); n > 2 {
		t.Errorf("%d events kept for a 15s period scaled every 20s", n)
	}
}
