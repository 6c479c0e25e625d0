package controllermanager

import (
	"context"

	"k8s.io/utils/clock"

	"mizzen/internal/controller/cronjob"
	"mizzen/internal/controller/daemonset"
	"mizzen/internal/controller/deployment"
	"mizzen/internal/controller/disruption"
	"mizzen/internal/controller/job"
	"mizzen/internal/controller/replicaset"
	"mizzen/internal/controller/statefulset"
	"mizzen/internal/controller/ttlafterfinished"
)

// workloadControllers lists the controllers that run workloads: deployment, replicaset,
// replicationcontroller, daemonset, statefulset, job, cronjob, ttl-after-finished,
// disruption.
func workloadControllers() []Descriptor {
	return []Descriptor{
		{Name: "deployment", Start: func(ctx context.Context, cc *ControllerContext) error {
			deployment.New(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "replicaset", Start: func(ctx context.Context, cc *ControllerContext) error {
			replicaset.NewReplicaSet(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "replicationcontroller", Start: func(ctx context.Context, cc *ControllerContext) error {
			replicaset.NewReplicationController(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "job", Start: func(ctx context.Context, cc *ControllerContext) error {
			job.New(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "cronjob", Start: func(ctx context.Context, cc *ControllerContext) error {
			cronjob.New(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "ttl-after-finished", Start: func(ctx context.Context, cc *ControllerContext) error {
			ttlafterfinished.New(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "disruption", Start: func(ctx context.Context, cc *ControllerContext) error {
			disruption.New(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "daemonset", Start: func(ctx context.Context, cc *ControllerContext) error {
			daemonset.New(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "statefulset", Start: func(ctx context.Context, cc *ControllerContext) error {
			statefulset.New(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
	}
}
