package apiserver

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/registry/networking"
)

// KubernetesServiceIP is the cluster IP of default/kubernetes: the range's first address.
func (s *Server) KubernetesServiceIP() net.IP {
	if s.services == nil {
		return nil
	}
	return s.services.FirstIP()
}

// Bootstrap creates what every cluster has from its first start (the system
// namespaces, the kubernetes service) and the given extra objects, leaving any that
// exist alone, and publishes the authentication ConfigMap aggregated servers read. It
// goes through the same create chain as a client's request, but records no
// managedFields: field tracking's type converter is built on the first client write,
// not at every start (upstream's objects show "kube-apiserver").
func (s *Server) Bootstrap(ctx context.Context, extra ...runtime.Object) error {
	var objs []runtime.Object
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	if s.services != nil {
		if err := s.services.ClaimFirstIP(ctx, "default/kubernetes"); err != nil {
			return err
		}
		objs = append(objs, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
				Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: s.services.FirstIP().String(), SessionAffinity: corev1.ServiceAffinityNone,
				Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(int32(s.advertisedPort()))}},
			},
		})
		objs = append(objs, &networkingv1.ServiceCIDR{
			ObjectMeta: metav1.ObjectMeta{Name: networking.DefaultServiceCIDRName},
			Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{s.services.cidr.String()}},
		})
	}
	objs = append(objs, extra...)
	local := s.localAPIServices()
	objs = append(objs, local...)
	for _, obj := range objs {
		gvks, _, err := s.scheme.ObjectKinds(obj)
		if err != nil {
			return err
		}
		h := s.handlerForKind(gvks[0].Group, gvks[0].Version, gvks[0].Kind)
		if h == nil {
			// A server built with only some resources (tests) skips the others.
			continue
		}
		acc := accessor(obj)
		if _, err := s.createObject(ctx, h, acc.GetNamespace(), obj, false, nil); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", h.Kind, acc.GetName(), err)
		}
	}
	if err := s.markLocalAPIServicesAvailable(ctx, local); err != nil {
		return err
	}
	if err := s.markDefaultServiceCIDRReady(ctx); err != nil {
		return err
	}
	return s.publishAuthenticationInfo(ctx)
}

func (s *Server) handlerForKind(group, version, kind string) *resourceHandler {
	for gvr, h := range s.handlers {
		if gvr.Group == group && gvr.Version == version && h.Kind == kind {
			return h
		}
	}
	return nil
}

func (s *Server) advertisedPort() int {
	_, port, err := net.SplitHostPort(s.cfg.ExternalAddress)
	if err != nil {
		return 6443
	}
	var p int
	fmt.Sscanf(port, "%d", &p)
	return p
}

// localAPIServices describes every group version this server serves itself, as the
// APIService objects upstream keeps for them ("v1.", "v1.apps", ...), available and
// marked Local.
func (s *Server) localAPIServices() []runtime.Object {
	var out []runtime.Object
	for gi, g := range s.groups {
		for vi, v := range g.versions {
			svc := &apiregistrationv1.APIService{
				ObjectMeta: metav1.ObjectMeta{Name: v + "." + g.name, Labels: map[string]string{"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
				Spec: apiregistrationv1.APIServiceSpec{Group: g.name, Version: v,
					GroupPriorityMinimum: int32(18000 - 100*gi), VersionPriority: int32(15 - vi)},
			}
			out = append(out, svc)
		}
	}
	return out
}

// markLocalAPIServicesAvailable sets the Available condition of the local APIServices.
func (s *Server) markLocalAPIServicesAvailable(ctx context.Context, objs []runtime.Object) error {
	h := s.handlerForKind(apiregistrationv1.SchemeGroupVersion.Group, apiregistrationv1.SchemeGroupVersion.Version, "APIService")
	if h == nil {
		return nil
	}
	for _, obj := range objs {
		name := accessor(obj).GetName()
		_, err := s.updateObject(ctx, h, "", name, updateStatus, false, nil, func(current runtime.Object) (runtime.Object, error) {
			svc := current.(*apiregistrationv1.APIService)
			for _, c := range svc.Status.Conditions {
				if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue {
					return svc, nil
				}
			}
			svc.Status.Conditions = []apiregistrationv1.APIServiceCondition{{
				Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue,
				LastTransitionTime: metav1.Now(), Reason: "Local", Message: "Local APIServices are always available",
			}}
			return svc, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// markDefaultServiceCIDRReady reports the default ServiceCIDR Ready, as upstream's
// apiserver does: it is the range the service allocator takes ClusterIPs from.
func (s *Server) markDefaultServiceCIDRReady(ctx context.Context) error {
	h := s.handlerForKind(networkingv1.SchemeGroupVersion.Group, networkingv1.SchemeGroupVersion.Version, "ServiceCIDR")
	if h == nil || s.services == nil {
		return nil
	}
	_, err := s.updateObject(ctx, h, "", networking.DefaultServiceCIDRName, updateStatus, false, nil, func(current runtime.Object) (runtime.Object, error) {
		cidr := current.(*networkingv1.ServiceCIDR)
		if meta.IsStatusConditionTrue(cidr.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
			return cidr, nil
		}
		meta.SetStatusCondition(&cidr.Status.Conditions, metav1.Condition{
			Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
			Reason: "Ready", Message: "Kubernetes default Service CIDR is ready",
		})
		return cidr, nil
	})
	return err
}

// Reconcile keeps one object of the cluster's defaults (the RBAC bootstrap policy):
// it creates desired when missing; otherwise reconcile gets a copy of the stored
// object and what it returns is written back when it reports a change. A server
// without the object's resource skips it.
func (s *Server) Reconcile(ctx context.Context, desired runtime.Object, reconcile func(current runtime.Object) (runtime.Object, bool)) error {
	gvks, _, err := s.scheme.ObjectKinds(desired)
	if err != nil {
		return err
	}
	h := s.handlerForKind(gvks[0].Group, gvks[0].Version, gvks[0].Kind)
	if h == nil {
		return nil
	}
	acc := accessor(desired)
	ns, name := acc.GetNamespace(), acc.GetName()
	_, err = s.createObject(ctx, h, ns, desired.DeepCopyObject(), false, nil)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	current, err := s.getObject(ctx, h, ns, name, "")
	if err != nil {
		return err
	}
	if _, changed := reconcile(current.DeepCopyObject()); !changed {
		return nil
	}
	_, err = s.updateObject(ctx, h, ns, name, updateMain, false, nil, func(current runtime.Object) (runtime.Object, error) {
		obj, _ := reconcile(current)
		return obj, nil
	})
	if err != nil {
		return fmt.Errorf("reconciling %s %s: %w", h.Kind, name, err)
	}
	s.log.Info("reconciled a default object", "kind", h.Kind, "name", name)
	return nil
}
