package plugins

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/scheduler/framework"
)

// TaintToleration filters nodes with NoSchedule/NoExecute taints the pod does not tolerate
// and scores down nodes with untolerated PreferNoSchedule taints.
type TaintToleration struct {
	handle framework.Handle
}

var (
	_ framework.FilterPlugin      = (*TaintToleration)(nil)
	_ framework.PreScorePlugin    = (*TaintToleration)(nil)
	_ framework.ScorePlugin       = (*TaintToleration)(nil)
	_ framework.EnqueueExtensions = (*TaintToleration)(nil)
)

// NewTaintToleration is the plugin factory.
func NewTaintToleration(_ json.RawMessage, h framework.Handle) (framework.Plugin, error) {
	return &TaintToleration{handle: h}, nil
}

// Name implements framework.Plugin.
func (*TaintToleration) Name() string { return TaintTolerationName }

// EventsToRegister: a node is added or its taints change.
func (*TaintToleration) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{
		{
			Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint},
			QueueingHintFn: func(pod *v1.Pod, _, newObj interface{}) bool {
				n, ok := newObj.(*v1.Node)
				if !ok {
					return true
				}
				_, untolerated := findUntoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations, hardTaint)
				return !untolerated
			},
		},
		{Event: framework.ClusterEvent{Resource: framework.Pod, ActionType: framework.UpdatePodTolerations}},
	}
}

func tolerates(tolerations []v1.Toleration, taint *v1.Taint) bool {
	for i := range tolerations {
		if tolerationMatches(&tolerations[i], taint) {
			return true
		}
	}
	return false
}

// tolerationMatches follows the API's toleration semantics: empty effect matches all
// effects, empty key with Exists matches all keys.
func tolerationMatches(t *v1.Toleration, taint *v1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", v1.TolerationOpEqual:
		return t.Value == taint.Value
	case v1.TolerationOpExists:
		return true
	}
	return false
}

func hardTaint(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
}

func findUntoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration, include func(*v1.Taint) bool) (v1.Taint, bool) {
	for i := range taints {
		if include != nil && !include(&taints[i]) {
			continue
		}
		if !tolerates(tolerations, &taints[i]) {
			return taints[i], true
		}
	}
	return v1.Taint{}, false
}

// Filter implements framework.FilterPlugin.
func (*TaintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	taint, found := findUntoleratedTaint(ni.Taints(), pod.Spec.Tolerations, hardTaint)
	if !found {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value))
}

type preferNoScheduleTolerations []v1.Toleration

func (p preferNoScheduleTolerations) Clone() framework.StateData { return p }

const taintTolerationStateKey framework.StateKey = "PreScore" + TaintTolerationName

// PreScore keeps the tolerations relevant to PreferNoSchedule.
func (*TaintToleration) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	var tols preferNoScheduleTolerations
	for _, t := range pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == v1.TaintEffectPreferNoSchedule {
			tols = append(tols, t)
		}
	}
	state.Write(taintTolerationStateKey, tols)
	return nil
}

// Score counts untolerated PreferNoSchedule taints (normalized in reverse).
func (*TaintToleration) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	var tols []v1.Toleration
	if d, ok := state.Read(taintTolerationStateKey); ok {
		tols = d.(preferNoScheduleTolerations)
	} else {
		tols = pod.Spec.Tolerations
	}
	var n int64
	taints := ni.Taints()
	for i := range taints {
		t := &taints[i]
		if t.Effect == v1.TaintEffectPreferNoSchedule && !tolerates(tols, t) {
			n++
		}
	}
	return n, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (t *TaintToleration) ScoreExtensions() framework.ScoreExtensions { return t }

// NormalizeScore: fewer intolerable taints is better.
func (*TaintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores []framework.NodeScore) *framework.Status {
	normalizeScores(framework.MaxNodeScore, true, scores)
	return nil
}
