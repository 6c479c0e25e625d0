// Package plugins holds the in-tree scheduling plugins, one file per plugin, each with a
// compile-time assertion of its extension points and the cluster events that can make a
// pod it rejected schedulable.
package plugins

import (
	"encoding/json"
	"fmt"

	"mizzen/internal/scheduler/framework"
)

// Factory builds a plugin from its (possibly empty) JSON args.
type Factory func(args json.RawMessage, h framework.Handle) (framework.Plugin, error)

// Plugin names, as upstream.
const (
	NodeNameName                        = "NodeName"
	NodeUnschedulableName               = "NodeUnschedulable"
	TaintTolerationName                 = "TaintToleration"
	NodeAffinityName                    = "NodeAffinity"
	NodePortsName                       = "NodePorts"
	NodeResourcesFitName                = "NodeResourcesFit"
	NodeResourcesBalancedAllocationName = "NodeResourcesBalancedAllocation"
	ImageLocalityName                   = "ImageLocality"
	InterPodAffinityName                = "InterPodAffinity"
	PodTopologySpreadName               = "PodTopologySpread"
	VolumeBindingName                   = "VolumeBinding"
	DefaultPreemptionName               = "DefaultPreemption"
	DefaultBinderName                   = "DefaultBinder"
	PrioritySortName                    = "PrioritySort"
	SchedulingGatesName                 = "SchedulingGates"
)

// Registry returns the factories of all in-tree plugins.
func Registry() map[string]Factory {
	return map[string]Factory{
		NodeNameName:                        func(json.RawMessage, framework.Handle) (framework.Plugin, error) { return &NodeName{}, nil },
		NodeUnschedulableName:               func(json.RawMessage, framework.Handle) (framework.Plugin, error) { return &NodeUnschedulable{}, nil },
		TaintTolerationName:                 NewTaintToleration,
		NodeAffinityName:                    NewNodeAffinity,
		NodePortsName:                       func(json.RawMessage, framework.Handle) (framework.Plugin, error) { return &NodePorts{}, nil },
		NodeResourcesFitName:                NewNodeResourcesFit,
		NodeResourcesBalancedAllocationName: NewBalancedAllocation,
		ImageLocalityName: func(_ json.RawMessage, h framework.Handle) (framework.Plugin, error) {
			return &ImageLocality{handle: h}, nil
		},
		InterPodAffinityName:  NewInterPodAffinity,
		PodTopologySpreadName: NewPodTopologySpread,
		VolumeBindingName:     NewVolumeBinding,
		DefaultPreemptionName: NewDefaultPreemption,
		DefaultBinderName: func(_ json.RawMessage, h framework.Handle) (framework.Plugin, error) {
			return &DefaultBinder{handle: h}, nil
		},
		PrioritySortName:    func(json.RawMessage, framework.Handle) (framework.Plugin, error) { return &PrioritySort{}, nil },
		SchedulingGatesName: func(json.RawMessage, framework.Handle) (framework.Plugin, error) { return &SchedulingGates{}, nil },
	}
}

// decodeArgs fills args from raw JSON, leaving defaults for absent fields.
func decodeArgs(raw json.RawMessage, name string, args any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, args); err != nil {
		return fmt.Errorf("decoding %sArgs: %w", name, err)
	}
	return nil
}

// normalizeScores scales scores to [0, MaxNodeScore] by the highest score; reverse makes
// the highest raw score the lowest result.
func normalizeScores(maxPriority int64, reverse bool, scores []framework.NodeScore) {
	var highest int64
	for _, s := range scores {
		if s.Score > highest {
			highest = s.Score
		}
	}
	if highest == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = maxPriority
			}
		}
		return
	}
	for i := range scores {
		s := maxPriority * scores[i].Score / highest
		if reverse {
			s = maxPriority - s
		}
		scores[i].Score = s
	}
}

func errMissingState(plugin string) error {
	return fmt.Errorf("reading %q from cycleState: not found", "PreFilter"+plugin)
}
