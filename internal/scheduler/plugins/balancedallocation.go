package plugins

import (
	"context"
	"encoding/json"
	"math"

	v1 "k8s.io/api/core/v1"

	"mizzen/internal/scheduler/framework"
)

// BalancedAllocationArgs is the plugin's configuration.
type BalancedAllocationArgs struct {
	Resources []ResourceSpec `json:"resources,omitempty"`
}

// BalancedAllocation favours nodes whose resource usage fractions stay close to each
// other once the pod is placed (score = (1 - standard deviation) * 100).
type BalancedAllocation struct {
	resources []ResourceSpec
}

var (
	_ framework.PreScorePlugin = (*BalancedAllocation)(nil)
	_ framework.ScorePlugin    = (*BalancedAllocation)(nil)
)

// NewBalancedAllocation is the plugin factory.
func NewBalancedAllocation(raw json.RawMessage, _ framework.Handle) (framework.Plugin, error) {
	var args BalancedAllocationArgs
	if err := decodeArgs(raw, NodeResourcesBalancedAllocationName, &args); err != nil {
		return nil, err
	}
	if len(args.Resources) == 0 {
		args.Resources = defaultScoringResources
	}
	return &BalancedAllocation{resources: args.Resources}, nil
}

// Name implements framework.Plugin.
func (*BalancedAllocation) Name() string { return NodeResourcesBalancedAllocationName }

// PreScore computes the pod's scoring requests once.
func (*BalancedAllocation) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(balancedStateKey, &fitScoreState{nonZero: framework.PodInfoFor(state, pod).NonZeroRequests})
	return nil
}

const balancedStateKey framework.StateKey = "PreScore" + NodeResourcesBalancedAllocationName

// Score implements framework.ScorePlugin.
func (pl *BalancedAllocation) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	var podReq *framework.Resource
	if d, ok := state.Read(balancedStateKey); ok {
		podReq = &d.(*fitScoreState).nonZero
	} else {
		r := framework.PodInfoFor(state, pod).NonZeroRequests
		podReq = &r
	}
	fractions := make([]float64, 0, len(pl.resources))
	for _, r := range pl.resources {
		requested, allocatable := requestedAndAllocatable(ni, podReq, v1.ResourceName(r.Name))
		if allocatable == 0 {
			continue
		}
		f := float64(requested) / float64(allocatable)
		if f > 1 {
			f = 1
		}
		fractions = append(fractions, f)
	}
	if len(fractions) == 0 {
		return 0, nil
	}
	var mean float64
	for _, f := range fractions {
		mean += f
	}
	mean /= float64(len(fractions))
	var variance float64
	for _, f := range fractions {
		variance += (f - mean) * (f - mean)
	}
	std := math.Sqrt(variance / float64(len(fractions)))
	return int64((1 - std) * float64(framework.MaxNodeScore)), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (*BalancedAllocation) ScoreExtensions() framework.ScoreExtensions { return nil }
