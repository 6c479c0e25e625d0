package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/netpol"
	"mizzen/internal/podnet"
)

// PodNetworkOptions are the pod network's settings (--pod-network and friends).
type PodNetworkOptions struct {
	Mode        podnet.Mode
	ClusterCIDR string
	Bridge      string
	VNI, Port   int
	Log         *slog.Logger
}

// RunPodNetwork connects this node's pods with the other nodes' until ctx ends, with
// the kubelet's credentials (a node may update its own Node).
func RunPodNetwork(ctx context.Context, cfg *rest.Config, nodeName string, po PodNetworkOptions) error {
	cidr, err := netip.ParsePrefix(po.ClusterCIDR)
	if err != nil {
		return fmt.Errorf("--cluster-cidr %q: %w", po.ClusterCIDR, err)
	}
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	return podnet.Run(ctx, podnet.Options{Client: client, NodeName: nodeName, Mode: po.Mode, ClusterCIDR: cidr,
		Bridge: po.Bridge, VNI: po.VNI, Port: po.Port, Log: po.Log})
}

// NetworkPolicyOptions are the network policy enforcement's settings.
type NetworkPolicyOptions struct {
	// Table is the node's nftables table (netpol.TableName of its bridge).
	Table string
	Log   *slog.Logger
}

// RunNetworkPolicy enforces NetworkPolicies on this node until ctx ends.
func RunNetworkPolicy(ctx context.Context, cfg *rest.Config, nodeName string, no NetworkPolicyOptions) error {
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	return netpol.Run(ctx, netpol.Options{Client: client, NodeName: nodeName, Table: netpol.Table{Name: no.Table}, Log: no.Log})
}
