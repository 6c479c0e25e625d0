// Package podsecurity is upstream's PodSecurity plugin: a namespace's
// pod-security.kubernetes.io/enforce, audit and warn labels (with their -version
// labels) hold pods to the Pod Security Standards (privileged, baseline, restricted).
// Enforce refuses violating pods; warn answers with warnings, also for workloads whose
// pod templates would violate; changing a namespace's enforce label warns about
// existing pods that would not be admitted now.
package podsecurity

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/apiserver/admission"
)

// PluginName is upstream's name.
const PluginName = "PodSecurity"

const labelPrefix = "pod-security.kubernetes.io/"

var (
	namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	versionRE     = regexp.MustCompile(`^v1\.(0|[1-9][0-9]*)$`)
)

type podMeta struct{ annotations map[string]string }

// policy is a namespace's level and version for one mode.
type policy struct {
	level   Level
	version string
}

func (p policy) String() string { return string(p.level) + ":" + p.version }

// Plugin is PodSecurity.
type Plugin struct {
	admission.Ops
	reader admission.Reader
}

// New returns the plugin.
func New(r admission.Reader) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create, admission.Update}, reader: r}
}

var _ admission.Validator = (*Plugin)(nil)

// parse reads one mode's policy from labels; errs reports invalid values.
func parse(labels map[string]string, mode string) (policy, field.ErrorList) {
	var errs field.ErrorList
	p := policy{level: Privileged, version: "latest"}
	keys := modeLabels[mode]
	if v, ok := labels[keys.level]; ok {
		switch Level(v) {
		case Privileged, Baseline, Restricted:
			p.level = Level(v)
		default:
			errs = append(errs, field.NotSupported(labelsPath().Key(keys.level), v, []string{"privileged", "baseline", "restricted"}))
		}
	}
	if v, ok := labels[keys.version]; ok {
		if v != "latest" && !versionRE.MatchString(v) {
			errs = append(errs, field.Invalid(labelsPath().Key(keys.version), v, "must be \"latest\" or a version like v1.X"))
		} else {
			p.version = v
		}
	}
	return p, errs
}

// modeLabels are each mode's level and version label keys, joined once: parse runs
// twice for every pod admitted, and joining them there cost four allocations a pod.
var modeLabels = func() map[string]struct{ level, version string } {
	m := map[string]struct{ level, version string }{}
	for _, mode := range []string{"enforce", "audit", "warn"} {
		m[mode] = struct{ level, version string }{labelPrefix + mode, labelPrefix + mode + "-version"}
	}
	return m
}()

// labelsPath is where a namespace's labels are, for an error about one of them.
func labelsPath() *field.Path { return field.NewPath("metadata", "labels") }

// Validate applies the namespace's policies to pods and pod templates, and checks
// namespace label changes.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Resource.Group == "" && a.Resource.Resource == "namespaces" && a.Subresource == "" {
		return p.validateNamespace(ctx, a)
	}
	if a.Namespace == "" || a.Object == nil {
		return nil
	}
	meta, spec, isPod := podSpec(a.Object)
	if spec == nil || (a.Subresource != "" && a.Subresource != "ephemeralcontainers") {
		return nil
	}
	if isPod && a.Operation == admission.Update && a.Subresource == "" {
		return nil // only what a pod starts with (and ephemeral containers) is checked
	}
	nsObj, err := p.reader.Get(ctx, namespacesGVR, "", a.Namespace)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return apierrors.NewInternalError(err)
	}
	labels := nsObj.(*corev1.Namespace).Labels
	enforce, _ := parse(labels, "enforce")
	warn, _ := parse(labels, "warn")
	if isPod {
		if v := check(enforce.level, meta, spec); len(v) > 0 {
			return admission.Forbiddenf(a, "violates PodSecurity %q: %s", enforce.String(), format(v))
		}
	}
	if v := check(warn.level, meta, spec); len(v) > 0 {
		admission.AddWarning(ctx, fmt.Sprintf("would violate PodSecurity %q: %s", warn.String(), format(v)))
	}
	if !isPod {
		// A workload's pods will meet the enforce level: say so now, as upstream.
		if v := check(enforce.level, meta, spec); len(v) > 0 && enforce.level != warn.level {
			admission.AddWarning(ctx, fmt.Sprintf("would violate PodSecurity %q: %s", enforce.String(), format(v)))
		}
	}
	return nil
}

// format is upstream's list: reason (detail), reason (detail).
func format(vs []violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		if v.detail == "" {
			parts[i] = v.reason
		} else {
			parts[i] = v.reason + " (" + v.detail + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// validateNamespace refuses invalid labels and warns when a new enforce level would
// refuse pods that already run there.
func (p *Plugin) validateNamespace(ctx context.Context, a *admission.Attributes) error {
	ns, ok := a.Object.(*corev1.Namespace)
	if !ok {
		return nil
	}
	var errs field.ErrorList
	var enforce policy
	for _, mode := range []string{"enforce", "audit", "warn"} {
		pol, e := parse(ns.Labels, mode)
		errs = append(errs, e...)
		if mode == "enforce" {
			enforce = pol
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind(), ns.Name, errs)
	}
	if a.Operation != admission.Update || enforce.level == Privileged {
		return nil
	}
	if old, ok := a.OldObject.(*corev1.Namespace); ok {
		if prev, _ := parse(old.Labels, "enforce"); prev == enforce {
			return nil
		}
	}
	objs, err := p.reader.List(ctx, podsGVR, ns.Name)
	if err != nil {
		return nil
	}
	type bad struct{ name, why string }
	var found []bad
	for _, o := range objs {
		pod := o.(*corev1.Pod)
		if v := check(enforce.level, &podMeta{pod.Annotations}, &pod.Spec); len(v) > 0 {
			found = append(found, bad{pod.Name, format(v)})
		}
	}
	if len(found) == 0 {
		return nil
	}
	sort.Slice(found, func(i, j int) bool { return found[i].name < found[j].name })
	admission.AddWarning(ctx, fmt.Sprintf("existing pods in namespace %q violate the new PodSecurity enforce level %q", ns.Name, enforce.String()))
	for _, b := range found {
		admission.AddWarning(ctx, b.name+": "+b.why)
	}
	return nil
}

// podSpec finds the pod spec of a pod or of a workload's pod template.
func podSpec(obj any) (*podMeta, *corev1.PodSpec, bool) {
	tmpl := func(t *corev1.PodTemplateSpec) (*podMeta, *corev1.PodSpec, bool) {
		return &podMeta{t.Annotations}, &t.Spec, false
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return &podMeta{o.Annotations}, &o.Spec, true
	case *corev1.PodTemplate:
		return tmpl(&o.Template)
	case *corev1.ReplicationController:
		if o.Spec.Template != nil {
			return tmpl(o.Spec.Template)
		}
	case *appsv1.Deployment:
		return tmpl(&o.Spec.Template)
	case *appsv1.ReplicaSet:
		return tmpl(&o.Spec.Template)
	case *appsv1.StatefulSet:
		return tmpl(&o.Spec.Template)
	case *appsv1.DaemonSet:
		return tmpl(&o.Spec.Template)
	case *batchv1.Job:
		return tmpl(&o.Spec.Template)
	case *batchv1.CronJob:
		return tmpl(&o.Spec.JobTemplate.Spec.Template)
	}
	return nil, nil, false
}
