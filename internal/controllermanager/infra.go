package controllermanager

import (
	"context"
	"errors"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"mizzen/internal/controller/clusterroleaggregation"
	"mizzen/internal/controller/endpoints"
	"mizzen/internal/controller/endpointslice"
	"mizzen/internal/controller/endpointslicemirroring"
	"mizzen/internal/controller/garbagecollector"
	"mizzen/internal/controller/namespace"
	"mizzen/internal/controller/nodeipam"
	"mizzen/internal/controller/nodelifecycle"
	"mizzen/internal/controller/podgc"
	"mizzen/internal/controller/resourcequota"
	"mizzen/internal/controller/rootcacertpublisher"
	"mizzen/internal/controller/serviceaccount"
	"mizzen/internal/controller/servicecidr"
)

// infraControllers lists, under upstream's canonical names and aliases, the
// controllers that keep the cluster itself in order: endpoints, endpointslice, endpointslice mirroring,
// garbage collector, namespace, node lifecycle, taint eviction, node IPAM,
// serviceaccount, root CA publisher, resourcequota, podgc, clusterrole aggregation.
func infraControllers() []Descriptor {
	return []Descriptor{
		{Name: "clusterrole-aggregation-controller", Aliases: []string{"clusterrole-aggregation"}, Account: "clusterrole-aggregation-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			c := clusterroleaggregation.New(cc.Client, cc.Informers.Rbac().V1().ClusterRoles())
			go c.Run(ctx, 1)
			return nil
		}},
		{Name: "endpoints-controller", Aliases: []string{"endpoint", "endpoints"}, Account: "endpoint-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := endpoints.New(cc.Client, core.Services(), core.Pods(), core.Endpoints())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "endpointslice-controller", Aliases: []string{"endpointslice"}, Account: "endpointslice-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := endpointslice.New(cc.Client, core.Services(), core.Pods(), core.Nodes(), cc.Informers.Discovery().V1().EndpointSlices())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "endpointslice-mirroring-controller", Aliases: []string{"endpointslicemirroring"}, Account: "endpointslicemirroring-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := endpointslicemirroring.New(cc.Client, core.Services(), core.Endpoints(), cc.Informers.Discovery().V1().EndpointSlices())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "garbage-collector-controller", Aliases: []string{"garbagecollector", "garbage-collector"}, Account: "generic-garbage-collector", Start: func(ctx context.Context, cc *ControllerContext) error {
			meta, disc, err := dynamicClients(cc)
			if err != nil {
				return err
			}
			go garbagecollector.New(cc.Client, meta, disc, cc.Informers).Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "namespace-controller", Aliases: []string{"namespace"}, Account: "namespace-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			meta, disc, err := dynamicClients(cc)
			if err != nil {
				return err
			}
			c := namespace.New(cc.Client, meta, disc, cc.Informers.Core().V1().Namespaces())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "node-lifecycle-controller", Aliases: []string{"nodelifecycle", "node-lifecycle"}, Account: "node-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c, err := nodelifecycle.New(cc.Client, core.Nodes(), cc.Informers.Coordination().V1().Leases(), core.Pods(), cc.Options.NodeMonitorGracePeriod, cc.Options.NodeEviction)
			if err != nil {
				return err
			}
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "service-cidr-controller", Account: "service-cidrs-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			c := servicecidr.New(cc.Client, cc.Informers.Networking().V1().ServiceCIDRs())
			go c.Run(ctx, 1)
			return nil
		}},
		{Name: "taint-eviction-controller", Account: "node-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c, err := nodelifecycle.NewTaintEviction(cc.Client, core.Nodes(), core.Pods())
			if err != nil {
				return err
			}
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "node-ipam-controller", Aliases: []string{"nodeipam", "node-ipam"}, Account: "node-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			if cc.Options.ClusterCIDR == "" {
				return notConfigured("no --cluster-cidr to allocate pod CIDRs from")
			}
			c, err := nodeipam.New(cc.Client, cc.Informers.Core().V1().Nodes(), cc.Options.ClusterCIDR, cc.Options.NodeCIDRMaskSize)
			if err != nil {
				return err
			}
			go c.Run(ctx, 1) // one worker: allocations are sequential anyway
			return nil
		}},
		{Name: "serviceaccount-controller", Aliases: []string{"serviceaccount"}, Account: "service-account-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := serviceaccount.New(cc.Client, core.Namespaces(), core.ServiceAccounts())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "root-ca-certificate-publisher-controller", Aliases: []string{"root-ca-cert-publisher"}, Account: "root-ca-cert-publisher", Start: func(ctx context.Context, cc *ControllerContext) error {
			if len(cc.Options.RootCA) == 0 {
				return notConfigured("no CA bundle: the client config has no CA and --root-ca-file is unset")
			}
			core := cc.Informers.Core().V1()
			c := rootcacertpublisher.New(cc.Client, cc.Options.RootCA, core.Namespaces(), core.ConfigMaps())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "resourcequota-controller", Aliases: []string{"resourcequota"}, Account: "resourcequota-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			meta, disc, err := dynamicClients(cc)
			if err != nil {
				return err
			}
			core := cc.Informers.Core().V1()
			c := resourcequota.New(cc.Client, meta, disc, resourcequota.Informers{
				Quotas: core.ResourceQuotas(), Pods: core.Pods(), Services: core.Services(),
				ConfigMaps: core.ConfigMaps(), Secrets: core.Secrets(), PVCs: core.PersistentVolumeClaims(),
				// The workload kinds quotas commonly count, whose informers the workload
				// controllers share anyway.
				Replenish: []cache.SharedIndexInformer{core.ReplicationControllers().Informer(),
					cc.Informers.Apps().V1().ReplicaSets().Informer(), cc.Informers.Apps().V1().Deployments().Informer(),
					cc.Informers.Apps().V1().StatefulSets().Informer(), cc.Informers.Apps().V1().DaemonSets().Informer(),
					cc.Informers.Batch().V1().Jobs().Informer(), cc.Informers.Batch().V1().CronJobs().Informer()},
			})
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "pod-garbage-collector-controller", Aliases: []string{"podgc", "pod-garbage-collector"}, Account: "pod-garbage-collector", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := podgc.New(cc.Client, core.Pods(), core.Nodes(), cc.Options.TerminatedPodGCThreshold)
			go c.Run(ctx)
			return nil
		}},
	}
}

// dynamicClients builds the metadata and discovery clients that controllers working
// over every resource type need.
func dynamicClients(cc *ControllerContext) (metadata.Interface, discovery.DiscoveryInterface, error) {
	if cc.Config == nil {
		return nil, nil, errors.New("no rest config for metadata and discovery clients")
	}
	meta, err := metadata.NewForConfig(cc.Config)
	if err != nil {
		return nil, nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cc.Config)
	if err != nil {
		return nil, nil, err
	}
	return meta, disc, nil
}
