// Package resource describes the resource.k8s.io/v1 resources of dynamic resource
// allocation (DRA): deviceclasses, resourceclaims (with status), resourceclaimtemplates,
// resourceslices and devicetainterules (with status), with upstream's defaulting, the
// validation a client observes most (names, unions, immutable fields) and printing.
//
// mizzen serves them as an API only: no scheduler plugin allocates claims and no kubelet
// plugin prepares devices yet, so a pod that names a claim waits unscheduled, which the
// scheduler reports on the pod.
package resource

import (
	"context"
	"fmt"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

var groupVersion = resourcev1.SchemeGroupVersion

// Resources returns the resource.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{deviceClasses(), resourceClaims(), resourceClaimTemplates(), resourceSlices(), deviceTaintRules()}
}

var (
	nameAgeColumns = []metav1.TableColumnDefinition{registry.NameColumn, registry.AgeColumn}
	nameAgeRow     = func(obj runtime.Object) []interface{} {
		m, err := meta.Accessor(obj)
		if err != nil {
			return []interface{}{"", ""}
		}
		return []interface{}{m.GetName(), registry.Age(m.GetCreationTimestamp())}
	}
)

func deviceClasses() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "deviceclasses",
		Kind:         "DeviceClass",
		SingularName: "deviceclass",
		New:          func() runtime.Object { return &resourcev1.DeviceClass{} },
		NewList:      func() runtime.Object { return &resourcev1.DeviceClassList{} },
		Strategy:     deviceClassStrategy{},
		Printer:      &registry.Printer{Columns: nameAgeColumns, Row: nameAgeRow},
	}
}

func resourceClaims() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "resourceclaims",
		Kind:         "ResourceClaim",
		SingularName: "resourceclaim",
		Namespaced:   true,
		New:          func() runtime.Object { return &resourcev1.ResourceClaim{} },
		NewList:      func() runtime.Object { return &resourcev1.ResourceClaimList{} },
		Strategy:     resourceClaimStrategy{},
		HasStatus:    true,
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "State", Type: "string", Description: "A summary of the current state (allocated, pending, reserved, etc.)."},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				c := obj.(*resourcev1.ResourceClaim)
				return []interface{}{c.Name, claimState(c), registry.Age(c.CreationTimestamp)}
			},
		},
	}
}

// claimState summarises a claim as upstream's printer does: "pending", "allocated",
// "allocated,reserved", with "deleted" first once it is being deleted.
func claimState(c *resourcev1.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	switch {
	case c.Status.Allocation != nil:
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	case c.DeletionTimestamp == nil:
		states = append(states, "pending")
	}
	return strings.Join(states, ",")
}

func resourceClaimTemplates() *registry.Resource {
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "resourceclaimtemplates",
		Kind:         "ResourceClaimTemplate",
		SingularName: "resourceclaimtemplate",
		Namespaced:   true,
		New:          func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
		NewList:      func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} },
		Strategy:     resourceClaimTemplateStrategy{},
		Printer:      &registry.Printer{Columns: nameAgeColumns, Row: nameAgeRow},
	}
}

func resourceSlices() *registry.Resource {
	specDoc, poolDoc := resourcev1.ResourceSliceSpec{}.SwaggerDoc(), resourcev1.ResourcePool{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "resourceslices",
		Kind:         "ResourceSlice",
		SingularName: "resourceslice",
		New:          func() runtime.Object { return &resourcev1.ResourceSlice{} },
		NewList:      func() runtime.Object { return &resourcev1.ResourceSliceList{} },
		Strategy:     resourceSliceStrategy{},
		Fields: func(obj runtime.Object) fields.Set {
			s := obj.(*resourcev1.ResourceSlice)
			node := ""
			if s.Spec.NodeName != nil {
				node = *s.Spec.NodeName
			}
			return fields.Set{
				resourcev1.ResourceSliceSelectorNodeName: node,
				resourcev1.ResourceSliceSelectorDriver:   s.Spec.Driver,
				resourcev1.ResourceSliceSelectorPoolName: s.Spec.Pool.Name,
			}
		},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Node", Type: "string", Description: specDoc["nodeName"]},
				{Name: "Driver", Type: "string", Description: specDoc["driver"]},
				{Name: "Pool", Type: "string", Description: poolDoc["name"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				s := obj.(*resourcev1.ResourceSlice)
				node := ""
				if s.Spec.NodeName != nil {
					node = *s.Spec.NodeName
				}
				return []interface{}{s.Name, node, s.Spec.Driver, s.Spec.Pool.Name, registry.Age(s.CreationTimestamp)}
			},
		},
	}
}

func deviceTaintRules() *registry.Resource {
	doc := resourcev1.DeviceTaint{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "devicetaintrules",
		Kind:         "DeviceTaintRule",
		SingularName: "devicetaintrule",
		New:          func() runtime.Object { return &resourcev1.DeviceTaintRule{} },
		NewList:      func() runtime.Object { return &resourcev1.DeviceTaintRuleList{} },
		Strategy:     deviceTaintRuleStrategy{now: time.Now},
		HasStatus:    true,
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Key", Type: "string", Description: doc["key"]},
				{Name: "Value", Type: "string", Description: doc["value"]},
				{Name: "Effect", Type: "string", Description: doc["effect"]},
				{Name: "TimeAdded", Type: "string", Description: doc["timeAdded"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				r := obj.(*resourcev1.DeviceTaintRule)
				added := "<unset>"
				if t := r.Spec.Taint.TimeAdded; t != nil {
					added = registry.Age(*t)
				}
				return []interface{}{r.Name, r.Spec.Taint.Key, r.Spec.Taint.Value, string(r.Spec.Taint.Effect), added, registry.Age(r.CreationTimestamp)}
			},
		},
	}
}

// ---------------------------------------------------------------- strategies

type deviceClassStrategy struct{ registry.BaseStrategy }

func (deviceClassStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateDeviceClassSpec(&obj.(*resourcev1.DeviceClass).Spec, field.NewPath("spec"))
}

func (s deviceClassStrategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

type resourceClaimStrategy struct{ registry.BaseStrategy }

func (resourceClaimStrategy) Default(obj runtime.Object) {
	defaultDeviceClaim(&obj.(*resourcev1.ResourceClaim).Spec.Devices)
}

func (resourceClaimStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateDeviceClaim(&obj.(*resourcev1.ResourceClaim).Spec.Devices, field.NewPath("spec", "devices"))
}

// ValidateUpdate: a claim's spec is fixed once created; its status (the scheduler's
// allocation, the pods it is reserved for) is checked whatever the endpoint, since the
// server passes status changes through the same strategy.
func (s resourceClaimStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	c, oldC := obj.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim)
	var errs field.ErrorList
	if !apiequality.Semantic.DeepEqual(c.Spec, oldC.Spec) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), c.Spec, "field is immutable"))
	} else {
		errs = append(errs, s.Validate(ctx, obj)...)
	}
	return append(errs, validateClaimStatusUpdate(c, oldC)...)
}

type resourceClaimTemplateStrategy struct{ registry.BaseStrategy }

func (resourceClaimTemplateStrategy) Default(obj runtime.Object) {
	defaultDeviceClaim(&obj.(*resourcev1.ResourceClaimTemplate).Spec.Spec.Devices)
}

func (resourceClaimTemplateStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	t := obj.(*resourcev1.ResourceClaimTemplate)
	specPath := field.NewPath("spec")
	errs := metav1validation.ValidateLabels(t.Spec.Labels, specPath.Child("metadata", "labels"))
	return append(errs, validateDeviceClaim(&t.Spec.Spec.Devices, specPath.Child("spec", "devices"))...)
}

func (s resourceClaimTemplateStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	t, oldT := obj.(*resourcev1.ResourceClaimTemplate), old.(*resourcev1.ResourceClaimTemplate)
	if !apiequality.Semantic.DeepEqual(t.Spec, oldT.Spec) {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), t.Spec, "field is immutable")}
	}
	return s.Validate(ctx, obj)
}

type resourceSliceStrategy struct{ registry.BaseStrategy }

func (resourceSliceStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateResourceSliceSpec(&obj.(*resourcev1.ResourceSlice).Spec, field.NewPath("spec"))
}

// ValidateUpdate: the driver, the pool's name and the node are fixed once created.
func (s resourceSliceStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	spec, oldSpec := &obj.(*resourcev1.ResourceSlice).Spec, &old.(*resourcev1.ResourceSlice).Spec
	errs := s.Validate(ctx, obj)
	specPath := field.NewPath("spec")
	if spec.Driver != oldSpec.Driver {
		errs = append(errs, field.Invalid(specPath.Child("driver"), spec.Driver, "field is immutable"))
	}
	if spec.Pool.Name != oldSpec.Pool.Name {
		errs = append(errs, field.Invalid(specPath.Child("pool", "name"), spec.Pool.Name, "field is immutable"))
	}
	if !apiequality.Semantic.DeepEqual(spec.NodeName, oldSpec.NodeName) {
		errs = append(errs, field.Invalid(specPath.Child("nodeName"), spec.NodeName, "field is immutable"))
	}
	return errs
}

// deviceTaintRuleStrategy stamps a taint's timeAdded as upstream does: on create when
// unset, and again when an update changes the effect without choosing a time itself.
type deviceTaintRuleStrategy struct {
	registry.BaseStrategy
	now func() time.Time
}

func (s deviceTaintRuleStrategy) Default(obj runtime.Object) {
	r := obj.(*resourcev1.DeviceTaintRule)
	if r.Spec.Taint.TimeAdded == nil {
		// Seconds only: the time must survive encoding unchanged.
		r.Spec.Taint.TimeAdded = &metav1.Time{Time: s.now().Truncate(time.Second)}
	}
}

func (s deviceTaintRuleStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	r, oldR := obj.(*resourcev1.DeviceTaintRule), old.(*resourcev1.DeviceTaintRule)
	if r.Spec.Taint.Effect != oldR.Spec.Taint.Effect && r.Spec.Taint.TimeAdded.Equal(oldR.Spec.Taint.TimeAdded) {
		r.Spec.Taint.TimeAdded = &metav1.Time{Time: s.now().Truncate(time.Second)}
	}
}

func (deviceTaintRuleStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	r := obj.(*resourcev1.DeviceTaintRule)
	specPath := field.NewPath("spec")
	errs := validateDeviceTaint(r.Spec.Taint, specPath.Child("taint"))
	if sel := r.Spec.DeviceSelector; sel != nil {
		selPath := specPath.Child("deviceSelector")
		if sel.Driver != nil {
			errs = append(errs, validateDriverName(*sel.Driver, selPath.Child("driver"))...)
		}
		if sel.Pool != nil {
			errs = append(errs, validatePoolName(*sel.Pool, selPath.Child("pool"))...)
		}
		if sel.Device != nil {
			errs = append(errs, validateDNSLabel(*sel.Device, selPath.Child("device"))...)
		}
	}
	const maxConditions = 8
	condPath := field.NewPath("status", "conditions")
	if n := len(r.Status.Conditions); n > maxConditions {
		errs = append(errs, field.TooMany(condPath, n, maxConditions))
	}
	return append(errs, metav1validation.ValidateConditions(r.Status.Conditions, condPath)...)
}

func (s deviceTaintRuleStrategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// ---------------------------------------------------------------- validation

// Upstream's limits (resource.k8s.io/v1 constants).
const (
	maxRequests         = resourcev1.DeviceRequestsMaxSize
	maxSelectors        = resourcev1.DeviceSelectorsMaxSize
	maxConstraints      = resourcev1.DeviceConstraintsMaxSize
	maxConfigs          = resourcev1.DeviceConfigMaxSize
	maxFirstAvailable   = resourcev1.FirstAvailableDeviceRequestMaxSize
	maxDevicesPerSlice  = resourcev1.ResourceSliceMaxDevices
	maxReservedFor      = resourcev1.ResourceClaimReservedForMaxSize
	maxPoolNameLength   = resourcev1.PoolNameMaxLength
	maxCELExpressionLen = resourcev1.CELSelectorExpressionMaxLength
)

func defaultDeviceClaim(d *resourcev1.DeviceClaim) {
	for i := range d.Requests {
		r := &d.Requests[i]
		if r.Exactly != nil {
			defaultAllocation(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			defaultAllocation(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
		}
	}
}

// defaultAllocation: ExactCount of one device unless the request says otherwise.
func defaultAllocation(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func validateDeviceClaim(d *resourcev1.DeviceClaim, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	reqPath := fldPath.Child("requests")
	if n := len(d.Requests); n > maxRequests {
		errs = append(errs, field.TooMany(reqPath, n, maxRequests))
	}
	names := map[string]bool{}
	for i, r := range d.Requests {
		p := reqPath.Index(i)
		if names[r.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), r.Name))
		}
		names[r.Name] = true
		errs = append(errs, validateDeviceRequest(r, p)...)
	}
	if n := len(d.Constraints); n > maxConstraints {
		errs = append(errs, field.TooMany(fldPath.Child("constraints"), n, maxConstraints))
	}
	for i, c := range d.Constraints {
		p := fldPath.Child("constraints").Index(i)
		set := 0
		if c.MatchAttribute != nil {
			set++
		}
		if c.DistinctAttribute != nil {
			set++
		}
		if set != 1 {
			errs = append(errs, field.Required(p, `exactly one of "matchAttribute" or "distinctAttribute" is required`))
		}
		errs = append(errs, validateRequestRefs(c.Requests, names, p.Child("requests"))...)
	}
	if n := len(d.Config); n > maxConfigs {
		errs = append(errs, field.TooMany(fldPath.Child("config"), n, maxConfigs))
	}
	for i, c := range d.Config {
		p := fldPath.Child("config").Index(i)
		errs = append(errs, validateRequestRefs(c.Requests, names, p.Child("requests"))...)
		errs = append(errs, validateDeviceConfiguration(c.DeviceConfiguration, p)...)
	}
	return errs
}

// validateRequestRefs checks that each name refers to a request of the claim ("req" or
// "req/subrequest").
func validateRequestRefs(refs []string, names map[string]bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ref := range refs {
		if !names[strings.SplitN(ref, "/", 2)[0]] {
			errs = append(errs, field.Invalid(fldPath.Index(i), ref, "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"))
		}
	}
	return errs
}

func validateDeviceRequest(r resourcev1.DeviceRequest, fldPath *field.Path) field.ErrorList {
	errs := validateDNSLabel(r.Name, fldPath.Child("name"))
	switch {
	case r.Exactly == nil && len(r.FirstAvailable) == 0:
		errs = append(errs, field.Required(fldPath, "exactly one of `exactly` or `firstAvailable` is required"))
	case r.Exactly != nil && len(r.FirstAvailable) > 0:
		errs = append(errs, field.Invalid(fldPath, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
	case r.Exactly != nil:
		e, p := r.Exactly, fldPath.Child("exactly")
		errs = append(errs, validateDeviceClassName(e.DeviceClassName, p.Child("deviceClassName"))...)
		errs = append(errs, validateSelectors(e.Selectors, p.Child("selectors"))...)
		errs = append(errs, validateAllocationMode(e.AllocationMode, e.Count, p)...)
		errs = append(errs, validateTolerations(e.Tolerations, p.Child("tolerations"))...)
	default:
		p := fldPath.Child("firstAvailable")
		if n := len(r.FirstAvailable); n > maxFirstAvailable {
			errs = append(errs, field.TooMany(p, n, maxFirstAvailable))
		}
		seen := map[string]bool{}
		for i, sub := range r.FirstAvailable {
			sp := p.Index(i)
			if seen[sub.Name] {
				errs = append(errs, field.Duplicate(sp.Child("name"), sub.Name))
			}
			seen[sub.Name] = true
			errs = append(errs, validateDNSLabel(sub.Name, sp.Child("name"))...)
			errs = append(errs, validateDeviceClassName(sub.DeviceClassName, sp.Child("deviceClassName"))...)
			errs = append(errs, validateSelectors(sub.Selectors, sp.Child("selectors"))...)
			errs = append(errs, validateAllocationMode(sub.AllocationMode, sub.Count, sp)...)
			errs = append(errs, validateTolerations(sub.Tolerations, sp.Child("tolerations"))...)
		}
	}
	return errs
}

func validateAllocationMode(mode resourcev1.DeviceAllocationMode, count int64, fldPath *field.Path) field.ErrorList {
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			return field.ErrorList{field.Invalid(fldPath.Child("count"), count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode))}
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			return field.ErrorList{field.Invalid(fldPath.Child("count"), count, "must be greater than zero")}
		}
	default:
		return field.ErrorList{field.NotSupported(fldPath.Child("allocationMode"), mode,
			[]resourcev1.DeviceAllocationMode{resourcev1.DeviceAllocationModeAll, resourcev1.DeviceAllocationModeExactCount})}
	}
	return nil
}

func validateDeviceClassName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return validateDNSSubdomain(name, fldPath)
}

// validateSelectors checks the CEL selectors' shape; the expressions are not compiled
// here (nothing in mizzen evaluates them yet).
func validateSelectors(selectors []resourcev1.DeviceSelector, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := len(selectors); n > maxSelectors {
		errs = append(errs, field.TooMany(fldPath, n, maxSelectors))
	}
	for i, s := range selectors {
		p := fldPath.Index(i)
		switch {
		case s.CEL == nil:
			errs = append(errs, field.Required(p.Child("cel"), ""))
		case strings.TrimSpace(s.CEL.Expression) == "":
			errs = append(errs, field.Required(p.Child("cel", "expression"), ""))
		case len(s.CEL.Expression) > maxCELExpressionLen:
			errs = append(errs, field.TooLong(p.Child("cel", "expression"), "", maxCELExpressionLen))
		}
	}
	return errs
}

var (
	taintEffects    = []resourcev1.DeviceTaintEffect{resourcev1.DeviceTaintEffectNone, resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute}
	toleratorOps    = []resourcev1.DeviceTolerationOperator{resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists}
	allocationFroms = []resourcev1.AllocationConfigSource{resourcev1.AllocationConfigSourceClaim, resourcev1.AllocationConfigSourceClass}
)

func validateTolerations(tolerations []resourcev1.DeviceToleration, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		p := fldPath.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		}
		switch t.Operator {
		case resourcev1.DeviceTolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty for operator `Exists`"))
			}
		case resourcev1.DeviceTolerationOpEqual:
			errs = append(errs, validateLabelValue(t.Value, p.Child("value"))...)
		case "":
			errs = append(errs, field.Required(p.Child("operator"), ""))
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, toleratorOps))
		}
		if t.Effect != "" && !oneOf(t.Effect, taintEffects) {
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, taintEffects))
		}
	}
	return errs
}

func validateDeviceTaint(t resourcev1.DeviceTaint, fldPath *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabelName(t.Key, fldPath.Child("key"))
	errs = append(errs, validateLabelValue(t.Value, fldPath.Child("value"))...)
	switch {
	case t.Effect == "":
		errs = append(errs, field.Required(fldPath.Child("effect"), ""))
	case !oneOf(t.Effect, taintEffects):
		errs = append(errs, field.NotSupported(fldPath.Child("effect"), t.Effect, taintEffects))
	}
	return errs
}

func validateDeviceConfiguration(c resourcev1.DeviceConfiguration, fldPath *field.Path) field.ErrorList {
	if c.Opaque == nil {
		return field.ErrorList{field.Required(fldPath.Child("opaque"), "")}
	}
	p := fldPath.Child("opaque")
	errs := validateDriverName(c.Opaque.Driver, p.Child("driver"))
	if len(c.Opaque.Parameters.Raw) == 0 && c.Opaque.Parameters.Object == nil {
		errs = append(errs, field.Required(p.Child("parameters"), ""))
	}
	return errs
}

func validateDeviceClassSpec(spec *resourcev1.DeviceClassSpec, fldPath *field.Path) field.ErrorList {
	errs := validateSelectors(spec.Selectors, fldPath.Child("selectors"))
	if n := len(spec.Config); n > maxConfigs {
		errs = append(errs, field.TooMany(fldPath.Child("config"), n, maxConfigs))
	}
	for i, c := range spec.Config {
		errs = append(errs, validateDeviceConfiguration(c.DeviceConfiguration, fldPath.Child("config").Index(i))...)
	}
	return errs
}

func validateClaimStatusUpdate(c, old *resourcev1.ResourceClaim) field.ErrorList {
	var errs field.ErrorList
	statusPath := field.NewPath("status")
	st, oldSt := &c.Status, &old.Status
	if n := len(st.ReservedFor); n > maxReservedFor {
		errs = append(errs, field.TooMany(statusPath.Child("reservedFor"), n, maxReservedFor))
	}
	seen := map[string]bool{}
	for i, ref := range st.ReservedFor {
		p := statusPath.Child("reservedFor").Index(i)
		if ref.Resource == "" {
			errs = append(errs, field.Required(p.Child("resource"), ""))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		if ref.UID == "" {
			errs = append(errs, field.Required(p.Child("uid"), ""))
		}
		if seen[string(ref.UID)] {
			errs = append(errs, field.Duplicate(p, ref))
		}
		seen[string(ref.UID)] = true
	}
	if len(st.ReservedFor) > 0 && st.Allocation == nil {
		errs = append(errs, field.Forbidden(statusPath.Child("reservedFor"), "may not be specified when `allocated` is not set"))
	}
	if st.Allocation != nil && oldSt.Allocation != nil && !apiequality.Semantic.DeepEqual(st.Allocation, oldSt.Allocation) {
		errs = append(errs, field.Invalid(statusPath.Child("allocation"), st.Allocation, "field is immutable"))
	}
	if a := st.Allocation; a != nil {
		for i, cfg := range a.Devices.Config {
			p := statusPath.Child("allocation", "devices", "config").Index(i)
			if !oneOf(cfg.Source, allocationFroms) {
				errs = append(errs, field.NotSupported(p.Child("source"), cfg.Source, allocationFroms))
			}
			errs = append(errs, validateDeviceConfiguration(cfg.DeviceConfiguration, p)...)
		}
		for i, r := range a.Devices.Results {
			p := statusPath.Child("allocation", "devices", "results").Index(i)
			errs = append(errs, validateDriverName(r.Driver, p.Child("driver"))...)
			errs = append(errs, validatePoolName(r.Pool, p.Child("pool"))...)
			errs = append(errs, validateDNSLabel(r.Device, p.Child("device"))...)
		}
	}
	return errs
}

func validateResourceSliceSpec(spec *resourcev1.ResourceSliceSpec, fldPath *field.Path) field.ErrorList {
	errs := validateDriverName(spec.Driver, fldPath.Child("driver"))
	poolPath := fldPath.Child("pool")
	errs = append(errs, validatePoolName(spec.Pool.Name, poolPath.Child("name"))...)
	if spec.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(poolPath.Child("resourceSliceCount"), spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	if spec.Pool.Generation < 0 {
		errs = append(errs, field.Invalid(poolPath.Child("generation"), spec.Pool.Generation, "must be greater than or equal to zero"))
	}
	set := 0
	if spec.NodeName != nil {
		set++
		for _, msg := range validation.IsDNS1123Subdomain(*spec.NodeName) {
			errs = append(errs, field.Invalid(fldPath.Child("nodeName"), *spec.NodeName, msg))
		}
	}
	if spec.NodeSelector != nil {
		set++
		if n := len(spec.NodeSelector.NodeSelectorTerms); n != 1 {
			errs = append(errs, field.Invalid(fldPath.Child("nodeSelector", "nodeSelectorTerms"), n, "must have exactly one node selector term"))
		}
	}
	if spec.AllNodes != nil && *spec.AllNodes {
		set++
	}
	if spec.PerDeviceNodeSelection != nil && *spec.PerDeviceNodeSelection {
		set++
	}
	switch {
	case set == 0:
		errs = append(errs, field.Required(fldPath, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
	case set > 1:
		errs = append(errs, field.Invalid(fldPath, nil, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"))
	}
	devPath := fldPath.Child("devices")
	if n := len(spec.Devices); n > maxDevicesPerSlice {
		errs = append(errs, field.TooMany(devPath, n, maxDevicesPerSlice))
	}
	if len(spec.Devices) > 0 && len(spec.SharedCounters) > 0 {
		errs = append(errs, field.Invalid(fldPath, nil, "only one of `devices` and `sharedCounters` may be set"))
	}
	names := map[string]bool{}
	for i, d := range spec.Devices {
		p := devPath.Index(i)
		if names[d.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		names[d.Name] = true
		errs = append(errs, validateDNSLabel(d.Name, p.Child("name"))...)
		for j, t := range d.Taints {
			errs = append(errs, validateDeviceTaint(t, p.Child("taints").Index(j))...)
		}
	}
	return errs
}

// ---------------------------------------------------------------- names

func validateDNSLabel(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateDNSSubdomain(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

// validateDriverName: a driver is a DNS subdomain, at most 63 characters, as upstream's.
func validateDriverName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	errs := validateDNSSubdomain(name, fldPath)
	if len(name) > resourcev1.DriverNameMaxLength {
		errs = append(errs, field.TooLong(fldPath, "", resourcev1.DriverNameMaxLength))
	}
	return errs
}

// validatePoolName: one or more DNS subdomains separated by slashes.
func validatePoolName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	if len(name) > maxPoolNameLength {
		errs = append(errs, field.TooLong(fldPath, "", maxPoolNameLength))
	}
	for _, part := range strings.Split(name, "/") {
		errs = append(errs, validateDNSSubdomain(part, fldPath)...)
	}
	return errs
}

func validateLabelValue(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func oneOf[T comparable](v T, allowed []T) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
