// Package limitranger is upstream's LimitRanger plugin: the LimitRanges of a namespace
// default the requests and limits of new pods' containers, and bound containers, pods
// and claims by min, max and maxLimitRequestRatio, with upstream's messages.
package limitranger

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "LimitRanger"

// annotation records what the plugin defaulted, as upstream's.
const annotation = "kubernetes.io/limit-ranger"

var limitRangesGVR = corev1.SchemeGroupVersion.WithResource("limitranges")

// Plugin is LimitRanger.
type Plugin struct {
	admission.Ops
	reader admission.Reader
}

// New returns the plugin reading LimitRanges through r.
func New(r admission.Reader) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create, admission.Update}, reader: r}
}

var (
	_ admission.Mutator   = (*Plugin)(nil)
	_ admission.Validator = (*Plugin)(nil)
)

// applies: pods only at create (their resources are immutable after), claims always.
func applies(a *admission.Attributes) bool {
	if a.Subresource != "" {
		return false
	}
	switch a.Object.(type) {
	case *corev1.Pod:
		return a.Operation == admission.Create
	case *corev1.PersistentVolumeClaim:
		return true
	}
	return false
}

func (p *Plugin) ranges(ctx context.Context, namespace string) ([]*corev1.LimitRange, error) {
	objs, err := p.reader.List(ctx, limitRangesGVR, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.LimitRange, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.LimitRange))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Admit fills in a new pod's container defaults.
func (p *Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || !applies(a) {
		return nil
	}
	ranges, err := p.ranges(ctx, a.Namespace)
	if err != nil || len(ranges) == 0 {
		return err
	}
	var notes []string
	for _, lr := range ranges {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			for i := range pod.Spec.InitContainers {
				notes = appendNotes(notes, setDefaults(&pod.Spec.InitContainers[i], item), "init container", pod.Spec.InitContainers[i].Name)
			}
			for i := range pod.Spec.Containers {
				notes = appendNotes(notes, setDefaults(&pod.Spec.Containers[i], item), "container", pod.Spec.Containers[i].Name)
			}
		}
	}
	if len(notes) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[annotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
	}
	return nil
}

func appendNotes(notes, set []string, kind, name string) []string {
	for _, n := range set {
		notes = append(notes, n+" for "+kind+" "+name)
	}
	return notes
}

// setDefaults sets the requests and limits a container lacks and says which.
func setDefaults(c *corev1.Container, item corev1.LimitRangeItem) []string {
	var requests, limits []string
	for name, q := range item.Default {
		if _, ok := c.Resources.Limits[name]; !ok {
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			c.Resources.Limits[name] = q.DeepCopy()
			limits = append(limits, string(name))
		}
	}
	for name, q := range item.DefaultRequest {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			// A limit the user set below the default request is the request, as
			// upstream's defaulting (requests follow limits) would make it.
			if lim, ok := c.Resources.Limits[name]; ok && lim.Cmp(q) < 0 {
				q = lim
			}
			c.Resources.Requests[name] = q.DeepCopy()
			requests = append(requests, string(name))
		}
	}
	var parts []string
	if len(requests) > 0 {
		sort.Strings(requests)
		parts = append(parts, strings.Join(requests, ", ")+" request")
	}
	if len(limits) > 0 {
		sort.Strings(limits)
		parts = append(parts, strings.Join(limits, ", ")+" limit")
	}
	return parts
}

// Validate checks a pod or claim against every LimitRange of its namespace.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if !applies(a) {
		return nil
	}
	ranges, err := p.ranges(ctx, a.Namespace)
	if err != nil || len(ranges) == 0 {
		return err
	}
	var errs []error
	for _, lr := range ranges {
		for _, item := range lr.Spec.Limits {
			switch o := a.Object.(type) {
			case *corev1.Pod:
				switch item.Type {
				case corev1.LimitTypeContainer:
					for _, c := range append(append([]corev1.Container{}, o.Spec.InitContainers...), o.Spec.Containers...) {
						errs = append(errs, check(string(corev1.LimitTypeContainer), item, c.Resources.Requests, c.Resources.Limits)...)
					}
				case corev1.LimitTypePod:
					errs = append(errs, check(string(corev1.LimitTypePod), item, podTotal(o, false), podTotal(o, true))...)
				}
			case *corev1.PersistentVolumeClaim:
				if item.Type == corev1.LimitTypePersistentVolumeClaim {
					errs = append(errs, checkClaim(item, o.Spec.Resources.Requests)...)
				}
			}
		}
	}
	if len(errs) > 0 {
		return admission.NewForbidden(a, utilerrors.NewAggregate(errs))
	}
	return nil
}

// podTotal sums the containers' requests (or limits), taking the largest init
// container where it exceeds the sum, plus the overhead.
func podTotal(pod *corev1.Pod, limits bool) corev1.ResourceList {
	pick := func(c corev1.Container) corev1.ResourceList {
		if limits {
			return c.Resources.Limits
		}
		return c.Resources.Requests
	}
	total := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		for n, q := range pick(c) {
			sum := total[n]
			sum.Add(q)
			total[n] = sum
		}
	}
	for _, c := range pod.Spec.InitContainers {
		for n, q := range pick(c) {
			if cur, ok := total[n]; !ok || q.Cmp(cur) > 0 {
				total[n] = q.DeepCopy()
			}
		}
	}
	for n, q := range pod.Spec.Overhead {
		if cur, ok := total[n]; ok {
			cur.Add(q)
			total[n] = cur
		}
	}
	return total
}

func check(limitType string, item corev1.LimitRangeItem, requests, limits corev1.ResourceList) []error {
	var errs []error
	for _, name := range sortedNames(item.Min) {
		if err := minConstraint(limitType, string(name), item.Min[name], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range sortedNames(item.Max) {
		if err := maxConstraint(limitType, string(name), item.Max[name], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range sortedNames(item.MaxLimitRequestRatio) {
		if err := ratioConstraint(limitType, string(name), item.MaxLimitRequestRatio[name], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// checkClaim bounds a claim's requests only, as upstream.
func checkClaim(item corev1.LimitRangeItem, requests corev1.ResourceList) []error {
	const limitType = string(corev1.LimitTypePersistentVolumeClaim)
	var errs []error
	for _, name := range sortedNames(item.Min) {
		if err := minConstraint(limitType, string(name), item.Min[name], requests, corev1.ResourceList{}); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range sortedNames(item.Max) {
		req, ok := requests[name]
		enforced := item.Max[name]
		if !ok {
			errs = append(errs, fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", name, limitType, enforced.String()))
		} else if r, _, e := values(req, resource.Quantity{}, enforced); r > e {
			errs = append(errs, fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String()))
		}
	}
	return errs
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// values compares in milli-units when nothing would overflow, as upstream.
func values(req, lim, enforced resource.Quantity) (int64, int64, int64) {
	r, l, e := req.Value(), lim.Value(), enforced.Value()
	if r <= resource.MaxMilliValue && l <= resource.MaxMilliValue && e <= resource.MaxMilliValue {
		return req.MilliValue(), lim.MilliValue(), enforced.MilliValue()
	}
	return r, l, e
}

func minConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, reqOK := requests[corev1.ResourceName(name)]
	lim, limOK := limits[corev1.ResourceName(name)]
	r, l, e := values(req, lim, enforced)
	if !reqOK {
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, limitType, enforced.String())
	}
	if r < e {
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	}
	if limOK && l < e {
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, limitType, enforced.String(), lim.String())
	}
	return nil
}

func maxConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, reqOK := requests[corev1.ResourceName(name)]
	lim, limOK := limits[corev1.ResourceName(name)]
	r, l, e := values(req, lim, enforced)
	if !limOK {
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, limitType, enforced.String())
	}
	if l > e {
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, limitType, enforced.String(), lim.String())
	}
	if reqOK && r > e {
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, limitType, enforced.String(), req.String())
	}
	return nil
}

func ratioConstraint(limitType, name string, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, reqOK := requests[corev1.ResourceName(name)]
	lim, limOK := limits[corev1.ResourceName(name)]
	r, l, _ := values(req, lim, enforced)
	if !reqOK || r == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, limitType, enforced.String())
	}
	if !limOK || l == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, limitType, enforced.String())
	}
	ratio := float64(l) / float64(r)
	shown := ratio
	max := float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		ratio *= 1000
		max = float64(enforced.MilliValue())
	}
	if ratio > max {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, limitType, enforced.String(), shown)
	}
	return nil
}
