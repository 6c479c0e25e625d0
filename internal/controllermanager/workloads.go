package controllermanager

import (
	"context"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/cronjob"
	"mizzen/internal/controller/daemonset"
	"mizzen/internal/controller/deployment"
	"mizzen/internal/controller/disruption"
	"mizzen/internal/controller/job"
	"mizzen/internal/controller/podautoscaler"
	"mizzen/internal/controller/replicaset"
	"mizzen/internal/controller/statefulset"
	"mizzen/internal/controller/ttlafterfinished"
)

// runner is what every workload controller offers once built.
type runner interface {
	Run(ctx context.Context, workers int)
}

// workload makes a Descriptor for a controller built by newController, named
// "<name>-controller" with name as its alias, working as the ServiceAccount account,
// as upstream; Start registers its informers and launches its workers without blocking.
func workload(name, account string, newController func(kubernetes.Interface, informers.SharedInformerFactory, clock.Clock) runner) Descriptor {
	return Descriptor{Name: name + "-controller", Aliases: []string{name}, Account: account, Start: func(ctx context.Context, cc *ControllerContext) error {
		newController(cc.Client, cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
		return nil
	}}
}

// workloadControllers lists the controllers that run workloads: deployment, replicaset,
// replicationcontroller, daemonset, statefulset, job, cronjob, ttl-after-finished,
// disruption, horizontal pod autoscaler.
func workloadControllers() []Descriptor {
	return []Descriptor{
		workload("deployment", "deployment-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return deployment.New(c, f, clk)
		}),
		workload("replicaset", "replicaset-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return replicaset.NewReplicaSet(c, f, clk)
		}),
		workload("replicationcontroller", "replication-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return replicaset.NewReplicationController(c, f, clk)
		}),
		workload("daemonset", "daemon-set-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return daemonset.New(c, f, clk)
		}),
		workload("statefulset", "statefulset-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return statefulset.New(c, f, clk)
		}),
		workload("job", "job-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return job.New(c, f, clk)
		}),
		workload("cronjob", "cronjob-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return cronjob.New(c, f, clk)
		}),
		workload("ttl-after-finished", "ttl-after-finished-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return ttlafterfinished.New(c, f, clk)
		}),
		workload("disruption", "disruption-controller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return disruption.New(c, f, clk)
		}),
		{Name: "horizontal-pod-autoscaler-controller", Aliases: []string{"horizontalpodautoscaling"}, Account: "horizontal-pod-autoscaler", Start: func(ctx context.Context, cc *ControllerContext) error {
			if cc.Config == nil {
				return notConfigured("no rest config for the scale and metrics clients")
			}
			c, err := podautoscaler.NewForConfig(ctx, cc.Config, cc.Client, cc.Informers, cc.Options.HPA)
			if err != nil {
				return err
			}
			c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
	}
}
