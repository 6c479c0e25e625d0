package apiserver

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Every running apiserver holds a lease key in storage (storage.APIServerLease), kept
// alive as upstream's lease endpoint reconciler does; default/kubernetes's Endpoints and
// EndpointSlice list the addresses whose keys are alive, so in-cluster clients reach
// only apiservers that are up.
const apiserverLeaseInterval = 10 * time.Second

// RunKubernetesEndpoints advertises ip (with the server's port) in default/kubernetes
// until ctx ends, then withdraws it so clients stop being sent to a stopped server.
// Returns once withdrawn; the store must still be up until then.
func (s *Server) RunKubernetesEndpoints(ctx context.Context, ip net.IP) {
	if ip.IsLoopback() {
		// Endpoints may not hold loopback addresses: pods could not reach them anyway.
		s.log.Info("not advertising this apiserver in the kubernetes service: its address is loopback", "ip", ip)
		return
	}
	lease := s.store.APIServerLease(ip)
	tick := time.NewTicker(apiserverLeaseInterval)
	defer tick.Stop()
	for {
		if err := lease.Refresh(ctx); err != nil {
			s.log.Warn("refreshing this apiserver's lease", "err", err)
		} else if err := s.reconcileKubernetesEndpoints(ctx); err != nil {
			s.log.Warn("updating the kubernetes service's endpoints", "err", err)
		}
		select {
		case <-ctx.Done():
			withdraw, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := lease.Withdraw(withdraw); err != nil {
				s.log.Warn("removing this apiserver's lease", "err", err)
				return
			}
			if err := s.reconcileKubernetesEndpoints(withdraw); err != nil {
				s.log.Warn("removing this apiserver from the kubernetes service's endpoints", "err", err)
			}
			return
		case <-tick.C:
		}
	}
}

// reconcileKubernetesEndpoints writes default/kubernetes's Endpoints and EndpointSlice
// from the live apiserver keys, when they differ.
func (s *Server) reconcileKubernetesEndpoints(ctx context.Context) error {
	ips, err := s.store.LiveAPIServers(ctx)
	if err != nil {
		return err
	}
	slices.Sort(ips)
	port := int32(s.advertisedPort())

	endpoints := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			// The slice below is written here too; a mirroring controller must leave it.
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)}},
	}
	if len(ips) > 0 {
		subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}}}
		for _, ip := range ips {
			subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: ip})
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		endpoints.Subsets = []corev1.EndpointSubset{subset}
	}
	if err := s.ensureObject(ctx, endpoints, func(current, want runtime.Object) bool {
		return apiequality.Semantic.DeepEqual(current.(*corev1.Endpoints).Subsets, want.(*corev1.Endpoints).Subsets)
	}, func(current, want runtime.Object) {
		current.(*corev1.Endpoints).Subsets = want.(*corev1.Endpoints).Subsets
	}); err != nil {
		return err
	}
	return s.ensureObject(ctx, slice, func(current, want runtime.Object) bool {
		c, w := current.(*discoveryv1.EndpointSlice), want.(*discoveryv1.EndpointSlice)
		return apiequality.Semantic.DeepEqual(c.Endpoints, w.Endpoints) && apiequality.Semantic.DeepEqual(c.Ports, w.Ports)
	}, func(current, want runtime.Object) {
		c, w := current.(*discoveryv1.EndpointSlice), want.(*discoveryv1.EndpointSlice)
		c.Endpoints, c.Ports = w.Endpoints, w.Ports
	})
}

// ensureObject creates want, or updates the stored object with copyWanted when same
// says it differs. Writes go through the server's own create and update chains.
func (s *Server) ensureObject(ctx context.Context, want runtime.Object, same func(current, want runtime.Object) bool, copyWanted func(current, want runtime.Object)) error {
	gvks, _, err := s.scheme.ObjectKinds(want)
	if err != nil {
		return err
	}
	h := s.handlerForKind(gvks[0].Group, gvks[0].Version, gvks[0].Kind)
	if h == nil {
		return nil // a server built with only some resources (tests)
	}
	acc := accessor(want)
	current, err := s.getObject(ctx, h, acc.GetNamespace(), acc.GetName(), "")
	if apierrors.IsNotFound(err) {
		_, err = s.createObject(ctx, h, acc.GetNamespace(), want, false, nil)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Another apiserver created it first: compare with its version.
		current, err = s.getObject(ctx, h, acc.GetNamespace(), acc.GetName(), "")
	}
	if err != nil {
		return err
	}
	if same(current, want) {
		return nil
	}
	_, err = s.updateObject(ctx, h, acc.GetNamespace(), acc.GetName(), updateMain, false, nil, func(current runtime.Object) (runtime.Object, error) {
		copyWanted(current, want)
		return current, nil
	})
	if err != nil {
		return fmt.Errorf("updating %s %s: %w", h.Kind, acc.GetName(), err)
	}
	return nil
}
