package apiserver

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
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
// exist alone. It goes through the same create chain as a client's request.
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
	}
	objs = append(objs, extra...)
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
		if _, err := s.createObject(ctx, h, acc.GetNamespace(), obj, false); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", h.Kind, acc.GetName(), err)
		}
	}
	return nil
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
