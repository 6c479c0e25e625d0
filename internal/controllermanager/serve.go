package controllermanager

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"

	"mizzen/internal/componentserve"
	"mizzen/internal/controllermanager/metrics"
)

// ServingOptions are --bind-address, --secure-port and --profiling: where /healthz,
// /livez, /readyz, /metrics (and /debug/pprof) are served over HTTPS with a
// self-signed certificate, behind delegated authentication and authorization, as
// upstream on :10257.
type ServingOptions = componentserve.Options

// serve answers until the returned stop is called, which closes the port before it
// returns: the server bundle runs the controller-manager again after it loses its
// Lease, and that run listens on the same port. The health checks fail only when this
// replica leads and has not renewed its lease in time (leader may be nil).
func serve(ctx context.Context, opts ServingOptions, client kubernetes.Interface, m *metrics.Metrics, leader *leaderelection.HealthzAdaptor) (stop func(), err error) {
	ep := componentserve.Endpoints{Client: client, Metrics: m.Handler()}
	if leader != nil {
		ep.Checks = []componentserve.Check{componentserve.LeaderElectionCheck(leader)}
	}
	return componentserve.Serve(ctx, opts, ep)
}
