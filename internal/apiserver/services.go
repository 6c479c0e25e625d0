package apiserver

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/storage"
)

// serviceAllocator hands out cluster IPs and node ports. Each allocation is an etcd key
// created only if absent, so no two services (and no two apiservers) ever get the same
// address or port.
type serviceAllocator struct {
	store    *storage.Store
	cidr     *net.IPNet
	base     uint32 // the network address as a number
	size     uint32 // addresses usable: the network and broadcast addresses are not
	portBase int
	portSize int
}

func newServiceAllocator(store *storage.Store, cidr *net.IPNet, portBase, portSize int) *serviceAllocator {
	ones, bits := cidr.Mask.Size()
	size := uint32(1)<<uint(bits-ones) - 2
	if portBase == 0 {
		portBase, portSize = 30000, 2768
	}
	return &serviceAllocator{store: store, cidr: cidr, base: binary.BigEndian.Uint32(cidr.IP.To4()), size: size, portBase: portBase, portSize: portSize}
}

// FirstIP is the address of the default/kubernetes service.
func (a *serviceAllocator) FirstIP() net.IP { return a.ipAt(0) }

func (a *serviceAllocator) ipAt(offset uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, a.base+1+offset)
	return ip
}

// claimFor claims key for owner if nobody holds it yet; a key the same owner holds
// already counts as claimed. Only a fresh claim is recorded for release, so a failed
// create never frees what an existing object of the same name holds.
func (a *serviceAllocator) claimFor(ctx context.Context, key storage.Allocation, owner string, claimed *[]storage.Allocation) (bool, error) {
	created, holder, err := a.store.Claim(ctx, key, owner)
	if err != nil {
		return false, err
	}
	if created {
		*claimed = append(*claimed, key)
		return true, nil
	}
	return holder == owner, nil
}

// claimFresh claims key only if nobody holds it.
func (a *serviceAllocator) claimFresh(ctx context.Context, key storage.Allocation, owner string) (bool, error) {
	created, _, err := a.store.Claim(ctx, key, owner)
	return created, err
}

func (a *serviceAllocator) allocate(ctx context.Context, obj runtime.Object, dryRun bool) (func(), error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return func() {}, nil
	}
	owner := svc.Namespace + "/" + svc.Name
	var claimed []storage.Allocation
	release := func() {
		for _, k := range claimed {
			_ = a.store.Release(context.WithoutCancel(ctx), k)
		}
	}
	fail := func(err error) (func(), error) { release(); return func() {}, err }
	specPath := field.NewPath("spec")
	if svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		if svc.Spec.ClusterIP != "" {
			ip := net.ParseIP(svc.Spec.ClusterIP)
			if ip == nil || !a.cidr.Contains(ip) {
				return fail(apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{
					field.Invalid(specPath.Child("clusterIPs").Index(0), svc.Spec.ClusterIP, fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", svc.Spec.ClusterIP, svc.Spec.ClusterIP, a.cidr))}))
			}
			if !dryRun {
				key := storage.ServiceIP(ip.String())
				ok, err := a.claimFor(ctx, key, owner, &claimed)
				if err != nil {
					return fail(err)
				}
				if !ok {
					return fail(apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{
						field.Invalid(specPath.Child("clusterIPs").Index(0), svc.Spec.ClusterIP, fmt.Sprintf("failed to allocate IP %s: provided IP is already allocated", svc.Spec.ClusterIP))}))
				}
			}
		} else {
			ip, key, err := a.allocateIP(ctx, owner, dryRun)
			if err != nil {
				return fail(err)
			}
			if key != nil {
				claimed = append(claimed, *key)
			}
			svc.Spec.ClusterIP = ip.String()
		}
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		if len(svc.Spec.IPFamilies) == 0 {
			svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
		if svc.Spec.IPFamilyPolicy == nil {
			single := corev1.IPFamilyPolicySingleStack
			svc.Spec.IPFamilyPolicy = &single
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 {
				if !dryRun {
					key := storage.NodePort(int(p.NodePort))
					ok, err := a.claimFor(ctx, key, owner, &claimed)
					if err != nil {
						return fail(err)
					}
					if !ok {
						return fail(apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{
							field.Invalid(specPath.Child("ports").Index(i).Child("nodePort"), p.NodePort, "provided port is already allocated")}))
					}
				}
				continue
			}
			port, key, err := a.allocatePort(ctx, owner, dryRun)
			if err != nil {
				return fail(err)
			}
			if key != nil {
				claimed = append(claimed, *key)
			}
			p.NodePort = int32(port)
		}
	}
	return release, nil
}

func (a *serviceAllocator) allocateIP(ctx context.Context, owner string, dryRun bool) (net.IP, *storage.Allocation, error) {
	// Random probing: the first address belongs to the kubernetes service.
	for i := 0; i < 64 && a.size > 1; i++ {
		ip := a.ipAt(1 + rand.Uint32N(a.size-1))
		if dryRun {
			return ip, nil, nil
		}
		key := storage.ServiceIP(ip.String())
		ok, err := a.claimFresh(ctx, key, owner)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return ip, &key, nil
		}
	}
	// Nearly full: scan in order.
	for off := uint32(1); off < a.size; off++ {
		ip := a.ipAt(off)
		key := storage.ServiceIP(ip.String())
		ok, err := a.claimFresh(ctx, key, owner)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return ip, &key, nil
		}
	}
	return nil, nil, apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: range is full"))
}

func (a *serviceAllocator) allocatePort(ctx context.Context, owner string, dryRun bool) (int, *storage.Allocation, error) {
	for i := 0; i < 64+a.portSize; i++ {
		port := a.portBase + rand.IntN(a.portSize)
		if i >= 64 {
			port = a.portBase + (i - 64)
		}
		if dryRun {
			return port, nil, nil
		}
		key := storage.NodePort(port)
		ok, err := a.claimFresh(ctx, key, owner)
		if err != nil {
			return 0, nil, err
		}
		if ok {
			return port, &key, nil
		}
	}
	return 0, nil, apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: range is full"))
}

// ClaimFirstIP reserves the kubernetes service's address for owner.
func (a *serviceAllocator) ClaimFirstIP(ctx context.Context, owner string) error {
	var claimed []storage.Allocation
	_, err := a.claimFor(ctx, storage.ServiceIP(a.FirstIP().String()), owner, &claimed)
	return err
}

// release frees a deleted service's address and ports.
func (a *serviceAllocator) release(ctx context.Context, svc *corev1.Service) {
	for _, ip := range svc.Spec.ClusterIPs {
		if ip != "" && ip != corev1.ClusterIPNone {
			_ = a.store.Release(ctx, storage.ServiceIP(ip))
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			_ = a.store.Release(ctx, storage.NodePort(int(p.NodePort)))
		}
	}
}

// releaseUnused frees the addresses and ports old held that updated no longer uses (a
// service that became ExternalName, or dropped its node ports).
func (a *serviceAllocator) releaseUnused(ctx context.Context, old, updated *corev1.Service) {
	keep := map[storage.Allocation]bool{}
	for _, ip := range updated.Spec.ClusterIPs {
		keep[storage.ServiceIP(ip)] = true
	}
	for _, p := range updated.Spec.Ports {
		if p.NodePort != 0 {
			keep[storage.NodePort(int(p.NodePort))] = true
		}
	}
	for _, ip := range old.Spec.ClusterIPs {
		if k := storage.ServiceIP(ip); ip != "" && ip != corev1.ClusterIPNone && !keep[k] {
			_ = a.store.Release(ctx, k)
		}
	}
	for _, p := range old.Spec.Ports {
		if k := storage.NodePort(int(p.NodePort)); p.NodePort != 0 && !keep[k] {
			_ = a.store.Release(ctx, k)
		}
	}
}
