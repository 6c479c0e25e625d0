package controllermanager

import (
	"context"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
// "<name>-controller" with name as its alias, as upstream; Start registers its
// informers and launches its workers without blocking.
func workload(name string, newController func(kubernetes.Interface, informers.SharedInformerFactory, clock.Clock) runner) Descriptor {
	return Descriptor{Name: name + "-controller", Aliases: []string{name}, Start: func(ctx context.Context, cc *ControllerContext) error {
		newController(clientFor(cc, name), cc.Informers, clock.RealClock{}).Run(ctx, cc.Options.ConcurrentSyncs)
		return nil
	}}
}

// clientFor gives a controller its own user agent ("<component's>/<controller>") so the
// apiserver's logs tell the controllers apart; the part before the first "/" stays the
// component's, which managedFields name as the manager ("kube-controller-manager").
func clientFor(cc *ControllerContext, name string) kubernetes.Interface {
	if cc.Config == nil {
		return cc.Client
	}
	cfg := rest.CopyConfig(cc.Config)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	cfg.UserAgent += "/" + name
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return cc.Client
	}
	return c
}

// workloadControllers lists the controllers that run workloads: deployment, replicaset,
// replicationcontroller, daemonset, statefulset, job, cronjob, ttl-after-finished,
// disruption, horizontal pod autoscaler.
func workloadControllers() []Descriptor {
	return []Descriptor{
		workload("deployment", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return deployment.New(c, f, clk)
		}),
		workload("replicaset", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return replicaset.NewReplicaSet(c, f, clk)
		}),
		workload("replicationcontroller", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return replicaset.NewReplicationController(c, f, clk)
		}),
		workload("daemonset", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return daemonset.New(c, f, clk)
		}),
		workload("statefulset", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return statefulset.New(c, f, clk)
		}),
		workload("job", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return job.New(c, f, clk)
		}),
		workload("cronjob", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return cronjob.New(c, f, clk)
		}),
		workload("ttl-after-finished", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return ttlafterfinished.New(c, f, clk)
		}),
		workload("disruption", func(c kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) runner {
			return disruption.New(c, f, clk)
		}),
		{Name: "horizontal-pod-autoscaler-controller", Aliases: []string{"horizontalpodautoscaling"}, Start: func(ctx context.Context, cc *ControllerContext) error {
			if cc.Config == nil {
				return notConfigured("no rest config for the scale and metrics clients")
			}
			cfg := rest.CopyConfig(cc.Config)
			if cfg.UserAgent == "" {
				cfg.UserAgent = rest.DefaultKubernetesUserAgent()
			}
			cfg.UserAgent += "/" + podautoscaler.Name
			c, err := podautoscaler.NewForConfig(ctx, cfg, clientFor(cc, podautoscaler.Name), cc.Informers, cc.Options.HPA)
			if err != nil {
				return err
			}
			c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
	}
}
