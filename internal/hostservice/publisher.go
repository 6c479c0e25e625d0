package hostservice

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// A host renews its Lease every RenewInterval; a slice whose Lease has not changed for
// LeaseDuration, as the sweeping host observes it, belongs to a host that is gone.
// Three missed renewals, as for node Leases.
const (
	RenewInterval = 10 * time.Second
	LeaseDuration = 30 * time.Second
)

// Publisher keeps one host in a Service: its EndpointSlice, and the Lease that says
// it is alive. Every Publisher of a Service also sweeps the slices of hosts whose
// Lease stopped moving. Its methods are not safe for concurrent use.
type Publisher struct {
	client kubernetes.Interface
	spec   Spec
	log    *slog.Logger
	// now is the clock expiry is measured with; only this host's observations of a
	// Lease are compared, never another host's clock.
	now func() time.Time
	// seen is, per other host's slice, its Lease as last observed ("" for none) and
	// since when it has been observed unchanged.
	seen map[string]observation
}

type observation struct {
	lease string
	since time.Time
}

// Publish creates or updates the Service, this host's Lease and its EndpointSlice, and
// returns the Publisher that keeps them: Start it.
func Publish(ctx context.Context, client kubernetes.Interface, spec Spec, log *slog.Logger) (*Publisher, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{client: client, spec: spec, log: log.With("service", spec.Namespace+"/"+spec.Name, "endpointslice", spec.hostName()),
		now: time.Now, seen: map[string]observation{}}
	if err := applyService(ctx, client, spec); err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	if err := p.renew(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Start renews the Lease and the slice every RenewInterval and sweeps other hosts'
// expired slices, until ctx ends or stop is called; then it withdraws this host's slice
// and Lease, so that clients stop being sent to a process that stopped. stop returns
// once withdrawn.
func (p *Publisher) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var done sync.WaitGroup
	done.Go(func() { p.run(ctx) })
	return func() {
		cancel()
		done.Wait()
	}
}

func (p *Publisher) run(ctx context.Context) {
	tick := time.NewTicker(RenewInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			withdraw, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := p.Withdraw(withdraw); err != nil {
				p.log.Warn("withdrawing this host from the service", "err", err)
			}
			return
		case <-tick.C:
		}
		if err := p.renew(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("renewing this host in the service", "err", err)
		}
		if err := p.Sweep(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("sweeping hosts gone from the service", "err", err)
		}
	}
}

// renew moves this host's Lease on, then writes its slice again if it is missing or
// differs (another host may have swept it while this one could not renew).
func (p *Publisher) renew(ctx context.Context) error {
	leases := p.client.CoordinationV1().Leases(p.spec.Namespace)
	name := p.spec.hostName()
	now := metav1.NewMicroTime(p.now())
	holder, _ := os.Hostname()
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.spec.Namespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: p.spec.Name, discoveryv1.LabelManagedBy: p.spec.ManagedBy}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(LeaseDuration / time.Second)),
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
	case err == nil:
		lease.Spec.HolderIdentity, lease.Spec.RenewTime = ptr.To(holder), &now
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(LeaseDuration / time.Second))
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("lease %s/%s: %w", p.spec.Namespace, name, err)
	}
	if err := applyEndpointSlice(ctx, p.client, p.spec); err != nil {
		return fmt.Errorf("endpointslice %s/%s: %w", p.spec.Namespace, name, err)
	}
	return nil
}

// Sweep deletes the slices of the Service (of this ManagedBy) whose host's Lease has
// not changed, or has been missing, for its duration as this host observed it, and
// their Leases. A slice without a Lease, such as the single slice older versions
// wrote, goes the same way.
func (p *Publisher) Sweep(ctx context.Context) error {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: p.spec.Name, discoveryv1.LabelManagedBy: p.spec.ManagedBy})
	list, err := p.client.DiscoveryV1().EndpointSlices(p.spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err
	}
	now := p.now()
	present := map[string]bool{}
	for i := range list.Items {
		slice := &list.Items[i]
		if slice.Name == p.spec.hostName() {
			continue
		}
		present[slice.Name] = true
		observed, duration := "", LeaseDuration
		lease, err := p.client.CoordinationV1().Leases(p.spec.Namespace).Get(ctx, slice.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			observed = lease.ResourceVersion + "/" + ptr.Deref(lease.Spec.HolderIdentity, "")
			if lease.Spec.RenewTime != nil {
				observed += "/" + lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
			}
			if d := lease.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
				duration = time.Duration(*d) * time.Second
			}
		case apierrors.IsNotFound(err):
			lease = nil
		default:
			return err
		}
		seen, ok := p.seen[slice.Name]
		if !ok || seen.lease != observed {
			p.seen[slice.Name] = observation{lease: observed, since: now}
			continue
		}
		if now.Sub(seen.since) < duration {
			continue
		}
		if err := p.sweep(ctx, slice, lease); err != nil {
			return err
		}
		delete(p.seen, slice.Name)
	}
	for name := range p.seen {
		if !present[name] {
			delete(p.seen, name)
		}
	}
	return nil
}

// sweep deletes an expired host's slice and Lease, each only as last observed: a host
// that came back meanwhile has rewritten them and keeps them.
func (p *Publisher) sweep(ctx context.Context, slice *discoveryv1.EndpointSlice, lease *coordinationv1.Lease) error {
	p.log.Info("removing a host gone from the service: its lease was not renewed", "gone", slice.Name)
	err := p.client.DiscoveryV1().EndpointSlices(p.spec.Namespace).Delete(ctx, slice.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &slice.UID, ResourceVersion: &slice.ResourceVersion}})
	if apierrors.IsConflict(err) {
		return nil // rewritten since: its host is back
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if lease == nil {
		return nil
	}
	err = p.client.CoordinationV1().Leases(p.spec.Namespace).Delete(ctx, lease.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// Withdraw deletes this host's slice and Lease.
func (p *Publisher) Withdraw(ctx context.Context) error {
	name := p.spec.hostName()
	if err := p.client.DiscoveryV1().EndpointSlices(p.spec.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := p.client.CoordinationV1().Leases(p.spec.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
