package plugins

import (
	"context"
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"mizzen/internal/scheduler/framework"
)

// ErrReasonNodeAffinity is shown when a node fails nodeSelector or required node affinity.
const ErrReasonNodeAffinity = "node(s) didn't match Pod's node affinity/selector"

// NodeAffinityArgs is the plugin's configuration.
type NodeAffinityArgs struct {
	// AddedAffinity is applied to all pods of the profile in addition to their own.
	AddedAffinity *v1.NodeAffinity `json:"addedAffinity,omitempty"`
}

// NodeAffinity filters on nodeSelector and required node affinity and scores preferred terms.
type NodeAffinity struct {
	addedNodeSelector *nodeaffinity.NodeSelector
	addedPrefs        *nodeaffinity.PreferredSchedulingTerms
}

var (
	_ framework.PreFilterPlugin   = (*NodeAffinity)(nil)
	_ framework.FilterPlugin      = (*NodeAffinity)(nil)
	_ framework.PreScorePlugin    = (*NodeAffinity)(nil)
	_ framework.ScorePlugin       = (*NodeAffinity)(nil)
	_ framework.EnqueueExtensions = (*NodeAffinity)(nil)
)

// NewNodeAffinity is the plugin factory.
func NewNodeAffinity(raw json.RawMessage, _ framework.Handle) (framework.Plugin, error) {
	var args NodeAffinityArgs
	if err := decodeArgs(raw, NodeAffinityName, &args); err != nil {
		return nil, err
	}
	pl := &NodeAffinity{}
	if a := args.AddedAffinity; a != nil {
		var err error
		if a.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			if pl.addedNodeSelector, err = nodeaffinity.NewNodeSelector(a.RequiredDuringSchedulingIgnoredDuringExecution); err != nil {
				return nil, err
			}
		}
		if len(a.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			if pl.addedPrefs, err = nodeaffinity.NewPreferredSchedulingTerms(a.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
				return nil, err
			}
		}
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*NodeAffinity) Name() string { return NodeAffinityName }

// EventsToRegister: a node is added or relabelled.
func (pl *NodeAffinity) EventsToRegister() []framework.ClusterEventWithHint {
	return []framework.ClusterEventWithHint{{
		Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeLabel},
		QueueingHintFn: func(pod *v1.Pod, _, newObj interface{}) bool {
			n, ok := newObj.(*v1.Node)
			if !ok {
				return true
			}
			match, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n)
			return match && (pl.addedNodeSelector == nil || pl.addedNodeSelector.Match(n))
		},
	}}
}

type nodeAffinityState struct {
	required nodeaffinity.RequiredNodeAffinity
}

func (s *nodeAffinityState) Clone() framework.StateData { return s }

const nodeAffinityPreFilterKey framework.StateKey = "PreFilter" + NodeAffinityName

// PreFilter parses the pod's selector once and, when required terms pin metadata.name,
// narrows the node set.
func (pl *NodeAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod) (*framework.PreFilterResult, *framework.Status) {
	state.Write(nodeAffinityPreFilterKey, &nodeAffinityState{required: nodeaffinity.GetRequiredNodeAffinity(pod)})
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, nil
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	names := map[string]struct{}{}
	for _, t := range terms {
		found := false
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == v1.NodeSelectorOpIn {
				for _, v := range f.Values {
					names[v] = struct{}{}
				}
				found = true
			}
		}
		if !found {
			// One term without a name restriction allows every node.
			return nil, nil
		}
	}
	if len(names) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin "+NodeAffinityName)
	}
	return &framework.PreFilterResult{NodeNames: names}, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*NodeAffinity) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin.
func (pl *NodeAffinity) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	node := ni.Node()
	if pl.addedNodeSelector != nil && !pl.addedNodeSelector.Match(node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match scheduler-enforced node affinity")
	}
	var required nodeaffinity.RequiredNodeAffinity
	if d, ok := state.Read(nodeAffinityPreFilterKey); ok {
		required = d.(*nodeAffinityState).required
	} else {
		required = nodeaffinity.GetRequiredNodeAffinity(pod)
	}
	if match, _ := required.Match(node); !match {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeAffinity)
	}
	return nil
}

type nodeAffinityScoreState struct {
	prefs *nodeaffinity.PreferredSchedulingTerms
}

func (s *nodeAffinityScoreState) Clone() framework.StateData { return s }

const nodeAffinityPreScoreKey framework.StateKey = "PreScore" + NodeAffinityName

// PreScore parses preferred terms once.
func (pl *NodeAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	s := &nodeAffinityScoreState{}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		prefs, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		if err != nil {
			return framework.AsStatus(err)
		}
		s.prefs = prefs
	}
	if s.prefs == nil && pl.addedPrefs == nil {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(nodeAffinityPreScoreKey, s)
	return nil
}

// Score sums the weights of matching preferred terms.
func (pl *NodeAffinity) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	var score int64
	if pl.addedPrefs != nil {
		score += pl.addedPrefs.Score(ni.Node())
	}
	if d, ok := state.Read(nodeAffinityPreScoreKey); ok && d.(*nodeAffinityScoreState).prefs != nil {
		score += d.(*nodeAffinityScoreState).prefs.Score(ni.Node())
	}
	return score, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *NodeAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore scales by the best node.
func (*NodeAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores []framework.NodeScore) *framework.Status {
	normalizeScores(framework.MaxNodeScore, false, scores)
	return nil
}
