package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
)

// AdmissionPlugin sees every create and update after validation and before the write,
// and may refuse it (or, for mutating plugins, change obj). This is where quota, limit
// ranges, service-account defaults and webhooks join the chain.
type AdmissionPlugin interface {
	Admit(ctx context.Context, operation string, resource, namespace string, obj, old runtime.Object) error
}

// admit runs the admission chain.
func (s *Server) admit(ctx context.Context, operation string, h *resourceHandler, obj, old runtime.Object) error {
	ns := accessor(obj).GetNamespace()
	for _, p := range s.cfg.Admission {
		if err := p.Admit(ctx, operation, h.Resource.Resource, ns, obj, old); err != nil {
			return err
		}
	}
	return nil
}

// beforeCreate reserves what a new object needs from shared pools (a service's cluster
// IP and node ports); release undoes it if the create does not happen.
func (s *Server) beforeCreate(ctx context.Context, h *resourceHandler, obj runtime.Object, dryRun bool) (release func(), err error) {
	if h.GroupVersionResource() == servicesGVR && s.services != nil {
		return s.services.allocate(ctx, obj, dryRun)
	}
	return func() {}, nil
}
