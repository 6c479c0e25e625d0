// Package resourcequota is upstream's ResourceQuota plugin: a write that would take a
// namespace's usage past a quota's hard limits is refused, and one that fits is charged
// to the quota's status.used in the same storage transaction that checks it, so racing
// creates never overshoot. The resourcequota controller recomputes status.used from
// what exists, which also returns what a charged write that then failed took.
package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/quota"
)

// PluginName is upstream's name.
const PluginName = "ResourceQuota"

var quotasGVR = corev1.SchemeGroupVersion.WithResource("resourcequotas")

// Plugin is ResourceQuota.
type Plugin struct {
	admission.Ops
	reader admission.Reader
	writer admission.StatusWriter
}

// New returns the plugin.
func New(r admission.Reader, w admission.StatusWriter) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create, admission.Update}, reader: r, writer: w}
}

var _ admission.Validator = (*Plugin)(nil)

// Validate checks the write against every quota of its namespace and charges it.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Namespace == "" || a.Subresource != "" || a.Object == nil {
		return nil
	}
	objs, err := p.reader.List(ctx, quotasGVR, a.Namespace)
	if err != nil || len(objs) == 0 {
		return err
	}
	quotas := make([]*corev1.ResourceQuota, 0, len(objs))
	for _, o := range objs {
		quotas = append(quotas, o.(*corev1.ResourceQuota))
	}
	sort.Slice(quotas, func(i, j int) bool { return quotas[i].Name < quotas[j].Name })

	full := usage(a, a.Object)
	// An update is charged what it adds to a quota that counted the old object too, and
	// all of its usage to a quota it enters (a pod given an active deadline moves from
	// NotTerminating to Terminating), as upstream's quota admission.
	growth := full
	if a.Operation == admission.Update {
		if a.OldObject == nil || !updateCounts(a) {
			return nil
		}
		growth = subtractNonNegative(full, usage(a, a.OldObject))
	}
	var charged []func()
	undo := func() {
		for _, c := range charged {
			c()
		}
	}
	for _, q := range quotas {
		if !matchesScopes(a.Object, q) {
			continue
		}
		delta := full
		if a.Operation == admission.Update && matchesScopes(a.OldObject, q) {
			delta = growth
		}
		if len(delta) == 0 {
			continue
		}
		restricted := restrictedNames(q, delta)
		if pod, ok := a.Object.(*corev1.Pod); ok {
			if err := mustSpecify(pod, q); err != nil {
				undo()
				return admission.Forbiddenf(a, "failed quota: %s: %v", q.Name, err)
			}
		}
		if len(restricted) == 0 && statusCaughtUp(q) {
			continue
		}
		if a.DryRun {
			if err := check(q, restricted, delta); err != nil {
				return admission.NewForbidden(a, err)
			}
			continue
		}
		restricted, err := p.charge(ctx, q, delta)
		if err != nil {
			undo()
			if apierrors.IsNotFound(err) {
				continue // the quota went away meanwhile
			}
			if _, isStatus := err.(apierrors.APIStatus); isStatus {
				return err
			}
			return admission.NewForbidden(a, err)
		}
		if len(restricted) == 0 {
			continue
		}
		q := q
		charged = append(charged, func() { p.refund(context.WithoutCancel(ctx), q, restricted, delta) })
	}
	return nil
}

// updateCounts: whether an update can change what the object counts for. A pod's
// resources do not change through its main resource, but its scope does when its active
// deadline comes or goes.
func updateCounts(a *admission.Attributes) bool {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return true
	}
	old, ok := a.OldObject.(*corev1.Pod)
	return ok && quota.IsTerminating(old) != quota.IsTerminating(pod)
}

// subtractNonNegative: what cur uses beyond prev, resource by resource.
func subtractNonNegative(cur, prev corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, q := range cur {
		q.Sub(prev[n])
		if q.Sign() > 0 {
			out[n] = q
		}
	}
	return out
}

// errNothingToCharge: the stored quota limits none of what the write uses.
var errNothingToCharge = errors.New("nothing to charge")

// charge adds delta to the quota's used in one transaction, if it fits, and returns
// the resources it charged. What the quota limits is read from the stored quota, not
// the cached one the caller listed: a quota whose status the controller has only just
// computed limits the writes that follow at once.
func (p *Plugin) charge(ctx context.Context, q *corev1.ResourceQuota, delta corev1.ResourceList) ([]corev1.ResourceName, error) {
	var restricted []corev1.ResourceName
	_, err := p.writer.UpdateStatus(ctx, quotasGVR, q.Namespace, q.Name, func(cur runtime.Object) (runtime.Object, error) {
		fresh := cur.(*corev1.ResourceQuota)
		restricted = restrictedNames(fresh, delta)
		if len(restricted) == 0 {
			return nil, errNothingToCharge
		}
		if err := check(fresh, restricted, delta); err != nil {
			return nil, err
		}
		for _, n := range restricted {
			used := fresh.Status.Used[n].DeepCopy()
			used.Add(delta[n])
			fresh.Status.Used[n] = used
		}
		return fresh, nil
	})
	if errors.Is(err, errNothingToCharge) {
		return nil, nil
	}
	return restricted, err
}

// statusCaughtUp: the quota's status limits what its spec does (the controller has
// published the spec's hard limits), so a cached copy tells what it restricts.
func statusCaughtUp(q *corev1.ResourceQuota) bool {
	return apiequality.Semantic.DeepEqual(q.Spec.Hard, q.Status.Hard)
}

// refund takes back a charge when a later quota refused the write.
func (p *Plugin) refund(ctx context.Context, q *corev1.ResourceQuota, restricted []corev1.ResourceName, delta corev1.ResourceList) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _ = p.writer.UpdateStatus(ctx, quotasGVR, q.Namespace, q.Name, func(cur runtime.Object) (runtime.Object, error) {
		fresh := cur.(*corev1.ResourceQuota)
		for _, n := range restricted {
			used := fresh.Status.Used[n].DeepCopy()
			used.Sub(delta[n])
			if used.Sign() < 0 {
				used = resource.Quantity{}
			}
			fresh.Status.Used[n] = used
		}
		return fresh, nil
	})
}

// check refuses, in upstream's words, usage that would pass the quota's hard limits.
func check(q *corev1.ResourceQuota, restricted []corev1.ResourceName, delta corev1.ResourceList) error {
	var unknown []string
	for _, n := range restricted {
		if _, ok := q.Status.Used[n]; !ok {
			unknown = append(unknown, string(n))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("status unknown for quota: %s, resources: %s", q.Name, strings.Join(unknown, ","))
	}
	var requested, used, limited []string
	for _, n := range restricted {
		next := q.Status.Used[n].DeepCopy()
		next.Add(delta[n])
		hard := q.Status.Hard[n]
		if next.Cmp(hard) > 0 {
			u, d := q.Status.Used[n], delta[n]
			requested = append(requested, fmt.Sprintf("%s=%s", n, d.String()))
			used = append(used, fmt.Sprintf("%s=%s", n, u.String()))
			limited = append(limited, fmt.Sprintf("%s=%s", n, hard.String()))
		}
	}
	if len(requested) > 0 {
		return fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s", q.Name,
			strings.Join(requested, ","), strings.Join(used, ","), strings.Join(limited, ","))
	}
	return nil
}

// restrictedNames are the resources the quota limits (by its status.hard, as the
// controller last published it) that the write uses, sorted.
func restrictedNames(q *corev1.ResourceQuota, delta corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for n := range q.Status.Hard {
		if _, ok := delta[n]; ok {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// matchesScopes: scoped quotas count only pods in their scopes.
func matchesScopes(obj runtime.Object, q *corev1.ResourceQuota) bool {
	if pod, ok := obj.(*corev1.Pod); ok {
		return quota.PodInScope(pod, q)
	}
	return len(q.Spec.Scopes) == 0 && q.Spec.ScopeSelector == nil
}

// mustSpecify refuses a pod that leaves out a compute resource the quota limits: it
// could not be counted.
func mustSpecify(pod *corev1.Pod, q *corev1.ResourceQuota) error {
	var missing []string
	for n := range q.Status.Hard {
		res, limits, ok := quota.ComputeResource(n)
		if !ok || (res != corev1.ResourceCPU && res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage) {
			continue
		}
		var names []string
		for _, c := range pod.Spec.Containers {
			list := c.Resources.Requests
			if limits {
				list = c.Resources.Limits
			}
			if _, has := list[res]; !has {
				names = append(names, c.Name)
			}
		}
		if len(names) > 0 {
			missing = append(missing, fmt.Sprintf("%s for: %s", n, strings.Join(names, ",")))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return fmt.Errorf("must specify %s", strings.Join(missing, "; "))
}

// usage is what one object counts for, by quota resource name.
func usage(a *admission.Attributes, obj runtime.Object) corev1.ResourceList {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	gr := a.Resource.GroupResource()
	countName := corev1.ResourceName("count/" + gr.String())
	out := corev1.ResourceList{countName: one}
	switch o := obj.(type) {
	case *corev1.Pod:
		if !quota.PodCounts(o, time.Now()) {
			return corev1.ResourceList{}
		}
		out[corev1.ResourcePods] = one
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			req := quota.PodAmount(o, r, false)
			lim := quota.PodAmount(o, r, true)
			out[r] = req
			out[corev1.ResourceName("requests."+string(r))] = req
			out[corev1.ResourceName("limits."+string(r))] = lim
		}
		for name, amount := range quota.PodOtherRequests(o) {
			out[name] = amount
		}
	case *corev1.Service:
		out[corev1.ResourceServices] = one
		ports := *resource.NewQuantity(int64(len(o.Spec.Ports)), resource.DecimalSI)
		switch o.Spec.Type {
		case corev1.ServiceTypeLoadBalancer:
			out[corev1.ResourceServicesLoadBalancers] = one
			// A load balancer told not to allocate node ports takes none, as upstream counts.
			if a := o.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
				ports = *resource.NewQuantity(0, resource.DecimalSI)
			}
			out[corev1.ResourceServicesNodePorts] = ports
		case corev1.ServiceTypeNodePort:
			out[corev1.ResourceServicesNodePorts] = ports
		}
	case *corev1.PersistentVolumeClaim:
		out[corev1.ResourcePersistentVolumeClaims] = one
		out[corev1.ResourceRequestsStorage] = o.Spec.Resources.Requests[corev1.ResourceStorage]
		if o.Spec.StorageClassName != nil && *o.Spec.StorageClassName != "" {
			prefix := *o.Spec.StorageClassName + ".storageclass.storage.k8s.io/"
			out[corev1.ResourceName(prefix+"persistentvolumeclaims")] = one
			out[corev1.ResourceName(prefix+"requests.storage")] = o.Spec.Resources.Requests[corev1.ResourceStorage]
		}
	case *corev1.ConfigMap:
		out[corev1.ResourceConfigMaps] = one
	case *corev1.Secret:
		out[corev1.ResourceSecrets] = one
	case *corev1.ReplicationController:
		out[corev1.ResourceReplicationControllers] = one
	case *corev1.ResourceQuota:
		out[corev1.ResourceQuotas] = one
	}
	return out
}
