package kubelet

import (
	"context"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// runLease renews the node's Lease in kube-node-lease every LeaseRenewInterval (plus
// jitter, as upstream): the cheap heartbeat the node lifecycle controller watches.
func (kl *Kubelet) runLease(ctx context.Context, nodeUID types.UID) {
	var last *coordinationv1.Lease
	for {
		lease, err := kl.renewLease(ctx, nodeUID, last)
		if err != nil {
			lease = nil // read it afresh next time
			if ctx.Err() == nil {
				kl.log.Error("renewing node lease", "err", err)
			}
		}
		last = lease
		select {
		case <-ctx.Done():
			return
		case <-kl.clock.After(jittered(kl.opts.LeaseRenewInterval)):
		}
	}
}

// renewLease updates the Lease, starting from the copy last written when there is one
// (one PUT per renewal, as upstream); it reads the Lease again only after a failure.
func (kl *Kubelet) renewLease(ctx context.Context, nodeUID types.UID, last *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := kl.client.CoordinationV1().Leases(nodeLeaseNS)
	now := metav1.NewMicroTime(kl.clock.Now())
	if last != nil {
		lease := last.DeepCopy()
		lease.Spec.RenewTime = &now
		if updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err == nil {
			return updated, nil
		}
	}
	lease, err := leases.Get(ctx, kl.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:            kl.opts.NodeName,
				Namespace:       nodeLeaseNS,
				OwnerReferences: []metav1.OwnerReference{nodeOwnerRef(kl.opts.NodeName, nodeUID)},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(kl.opts.NodeName),
				LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, err
	}
	lease.Spec.HolderIdentity = ptr.To(kl.opts.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDurationSeconds)
	lease.Spec.RenewTime = &now
	if len(lease.OwnerReferences) == 0 {
		lease.OwnerReferences = []metav1.OwnerReference{nodeOwnerRef(kl.opts.NodeName, nodeUID)}
	}
	return leases.Update(ctx, lease, metav1.UpdateOptions{})
}

// jittered is d lengthened by up to 4%, as upstream's kubelet spaces its Lease and node
// status loops (wait.JitterUntil, factor 0.04, measured from the end of each round):
// kubelets started together drift apart instead of writing in step.
func jittered(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/25+1))
}
