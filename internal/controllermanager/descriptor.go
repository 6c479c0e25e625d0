// Package controllermanager wires the controllers of internal/controller/* into one
// process: a shared informer factory, one leader-election Lease, and the --controllers
// flag that picks which ones run. It holds no controller logic itself.
package controllermanager

import (
	"context"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/controller/nodelifecycle"
	"mizzen/internal/controller/podautoscaler"
)

// ControllerContext is what every controller is started with.
type ControllerContext struct {
	// Client talks to the apiserver with the controller's own credentials (its
	// ServiceAccount's, or the manager's with the controller's name in the user agent).
	Client kubernetes.Interface
	// Config is the rest config Client was made from (for dynamic or metadata clients).
	Config *rest.Config
	// Informers is shared by all controllers, with the manager's own credentials; the
	// manager starts it after every controller has registered its informers.
	Informers informers.SharedInformerFactory
	// Options are the controller-manager's flags that controllers read.
	Options Options
}

// Options are the controller-manager flags that reach controllers.
type Options struct {
	// ConcurrentSyncs is the number of workers per controller (upstream has one flag per
	// controller; one number is enough here until a controller needs its own).
	ConcurrentSyncs int
	// NodeMonitorGracePeriod: a node whose Lease is older than this becomes Unknown.
	NodeMonitorGracePeriod time.Duration
	// NodeEviction paces NoExecute taints per zone (--node-eviction-rate,
	// --secondary-node-eviction-rate, --unhealthy-zone-threshold,
	// --large-cluster-size-threshold); zero values take upstream's defaults.
	NodeEviction nodelifecycle.EvictionOptions
	// ClusterCIDR is the range node IPAM hands podCIDRs out of; NodeCIDRMaskSize the
	// size of each.
	ClusterCIDR      string
	NodeCIDRMaskSize int
	// TerminatedPodGCThreshold: podgc deletes terminated pods beyond this many.
	TerminatedPodGCThreshold int
	// HPA are the horizontal pod autoscaler's --horizontal-pod-autoscaler-* flags; zero
	// values take upstream's defaults.
	HPA podautoscaler.Options
	// RootCA is the PEM bundle root-ca-cert-publisher puts in every namespace's
	// kube-root-ca.crt ConfigMap (Run fills it from the rest config's CA).
	RootCA []byte
	// ClusterSigningCertFile and ClusterSigningKeyFile are the CA csrsigning issues
	// certificates with; ClusterSigningDuration the longest it issues (a year when 0).
	ClusterSigningCertFile, ClusterSigningKeyFile string
	ClusterSigningDuration                        time.Duration
}

// Descriptor names a controller and starts it. Start registers the informers it needs
// and launches its goroutines under ctx; it must not block.
type Descriptor struct {
	// Name is upstream's canonical --controllers name ("deployment-controller").
	Name string
	// Aliases are other names --controllers accepts for it: upstream's older names
	// ("deployment"), and this project's earlier ones.
	Aliases []string
	// DisabledByDefault controllers run only when named in --controllers.
	DisabledByDefault bool
	// Account is the ServiceAccount in kube-system whose credentials the controller
	// works with under --use-service-account-credentials: upstream's name for it
	// ("deployment-controller"), bound to the role system:controller:ACCOUNT.
	Account string
	Start   func(ctx context.Context, cc *ControllerContext) error
}
