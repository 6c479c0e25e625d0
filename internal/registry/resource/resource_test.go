package resource

import (
	"context"
	"reflect"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"mizzen/internal/registry/registrytest"
)

type fieldErr = registrytest.FieldErr

var ctx = context.Background()

func TestIdentities(t *testing.T) {
	for _, tt := range []struct {
		resource, kind string
		namespaced     bool
		hasStatus      bool
	}{
		{"deviceclasses", "DeviceClass", false, false},
		{"resourceclaims", "ResourceClaim", true, true},
		{"resourceclaimtemplates", "ResourceClaimTemplate", true, false},
		{"resourceslices", "ResourceSlice", false, false},
		{"devicetaintrules", "DeviceTaintRule", false, true},
	} {
		r := registrytest.Find(t, Resources(), tt.resource)
		if r.GroupVersion.String() != "resource.k8s.io/v1" || r.Kind != tt.kind || r.Namespaced != tt.namespaced || r.HasStatus != tt.hasStatus {
			t.Errorf("%s: %s %s namespaced=%v status=%v", tt.resource, r.GroupVersion, r.Kind, r.Namespaced, r.HasStatus)
		}
	}
}

func exactRequest(name, class string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}
}

func claim(requests ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}}}
}

func TestResourceClaimDefaultAndValidate(t *testing.T) {
	r := registrytest.Find(t, Resources(), "resourceclaims")
	c := claim(exactRequest("req-0", "dra.example.com"))
	r.Strategy.Default(c)
	if e := c.Spec.Devices.Requests[0].Exactly; e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 {
		t.Errorf("defaults: mode %q count %d", e.AllocationMode, e.Count)
	}
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, c), nil)

	all := exactRequest("gpus", "gpu.example.com")
	all.Exactly.AllocationMode, all.Exactly.Count = resourcev1.DeviceAllocationModeAll, 2
	both := exactRequest("both", "x")
	both.FirstAvailable = []resourcev1.DeviceSubRequest{{Name: "a", DeviceClassName: "x"}}
	tests := []struct {
		name string
		c    *resourcev1.ResourceClaim
		want []fieldErr
	}{
		{"request name not a DNS label", claim(exactRequest("Req_0", "x")), []fieldErr{{field.ErrorTypeInvalid, "spec.devices.requests[0].name"}}},
		{"duplicate request", claim(exactRequest("a", "x"), exactRequest("a", "x")), []fieldErr{{field.ErrorTypeDuplicate, "spec.devices.requests[1].name"}}},
		{"no class", claim(exactRequest("a", "")), []fieldErr{{field.ErrorTypeRequired, "spec.devices.requests[0].exactly.deviceClassName"}}},
		{"neither exactly nor firstAvailable", claim(resourcev1.DeviceRequest{Name: "a"}), []fieldErr{{field.ErrorTypeRequired, "spec.devices.requests[0]"}}},
		{"both exactly and firstAvailable", claim(both), []fieldErr{{field.ErrorTypeInvalid, "spec.devices.requests[0]"}}},
		{"count with All", claim(all), []fieldErr{{field.ErrorTypeInvalid, "spec.devices.requests[0].exactly.count"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.Strategy.Default(tt.c)
			registrytest.AssertErrs(t, r.Strategy.Validate(ctx, tt.c), tt.want)
		})
	}
}

func TestResourceClaimUpdate(t *testing.T) {
	r := registrytest.Find(t, Resources(), "resourceclaims")
	old := claim(exactRequest("req-0", "dra.example.com"))
	r.Strategy.Default(old)

	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"test.dra.example.com": "test"}
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, labelled, old), nil)

	respec := old.DeepCopy()
	respec.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, respec, old), []fieldErr{{field.ErrorTypeInvalid, "spec"}})

	// "Nothing allocated" is a valid allocation; once set it is fixed.
	allocated := old.DeepCopy()
	allocated.Status.Allocation = &resourcev1.AllocationResult{}
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, allocated, old), nil)
	changed := allocated.DeepCopy()
	changed.Status.Allocation.Devices.Results = []resourcev1.DeviceRequestAllocationResult{{Request: "req-0", Driver: "dra.example.com", Pool: "p", Device: "d"}}
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, changed, allocated), []fieldErr{{field.ErrorTypeInvalid, "status.allocation"}})

	reservedEarly := old.DeepCopy()
	reservedEarly.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: types.UID("u")}}
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, reservedEarly, old), []fieldErr{{field.ErrorTypeForbidden, "status.reservedFor"}})
}

func TestResourceClaimTemplateSpecIsImmutable(t *testing.T) {
	r := registrytest.Find(t, Resources(), "resourceclaimtemplates")
	old := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: claim(exactRequest("req-0", "dra.example.com")).Spec}}
	r.Strategy.Default(old)
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, old), nil)
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"a": "b"}
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, labelled, old), nil)
	respec := old.DeepCopy()
	respec.Spec.Spec.Devices.Requests[0].Name = "req-1"
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, respec, old), []fieldErr{{field.ErrorTypeInvalid, "spec"}})
}

func TestDeviceClassValidate(t *testing.T) {
	r := registrytest.Find(t, Resources(), "deviceclasses")
	ok := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "dra.example.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "false"}}}}}
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, ok), nil)
	noCEL := ok.DeepCopy()
	noCEL.Spec.Selectors[0].CEL = nil
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, noCEL), []fieldErr{{field.ErrorTypeRequired, "spec.selectors[0].cel"}})
	noDriver := ok.DeepCopy()
	noDriver.Spec.Config = []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
		Opaque: &resourcev1.OpaqueDeviceConfiguration{Parameters: runtime.RawExtension{Raw: []byte(`{}`)}}}}}
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, noDriver), []fieldErr{{field.ErrorTypeRequired, "spec.config[0].opaque.driver"}})
}

func TestResourceSliceValidate(t *testing.T) {
	r := registrytest.Find(t, Resources(), "resourceslices")
	ok := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "dra.example.com", NodeName: ptr.To("no-such-node"),
		Pool: resourcev1.ResourcePool{Name: "cluster", Generation: 1, ResourceSliceCount: 1}}}
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, ok), nil)

	withDevice := ok.DeepCopy()
	withDevice.Spec.Devices = []resourcev1.Device{{Name: "device-0"}}
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, withDevice, ok), nil)

	twoNodes := ok.DeepCopy()
	twoNodes.Spec.AllNodes = ptr.To(true)
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, twoNodes), []fieldErr{{field.ErrorTypeInvalid, "spec"}})
	noNode := ok.DeepCopy()
	noNode.Spec.NodeName = nil
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, noNode), []fieldErr{{field.ErrorTypeRequired, "spec"}})
	dup := ok.DeepCopy()
	dup.Spec.Devices = []resourcev1.Device{{Name: "d"}, {Name: "d"}}
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, dup), []fieldErr{{field.ErrorTypeDuplicate, "spec.devices[1].name"}})
	moved := ok.DeepCopy()
	moved.Spec.Driver = "other.example.com"
	registrytest.AssertErrs(t, r.Strategy.ValidateUpdate(ctx, moved, ok), []fieldErr{{field.ErrorTypeInvalid, "spec.driver"}})

	fields := r.Fields(ok)
	if fields["spec.nodeName"] != "no-such-node" || fields["spec.driver"] != "dra.example.com" || fields["spec.pool.name"] != "cluster" {
		t.Errorf("fields = %v", fields)
	}
	registrytest.AssertColumns(t, r, "Name", "Node", "Driver", "Pool", "Age")
}

func TestDeviceTaintRule(t *testing.T) {
	r := registrytest.Find(t, Resources(), "devicetaintrules")
	now := time.Date(2026, 12, 1, 10, 0, 0, 500, time.UTC)
	s := deviceTaintRuleStrategy{now: func() time.Time { return now }}
	rule := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "testing", Effect: resourcev1.DeviceTaintEffectNone}}}
	s.Default(rule)
	if rule.Spec.Taint.TimeAdded == nil || !rule.Spec.Taint.TimeAdded.Time.Equal(now.Truncate(time.Second)) {
		t.Fatalf("timeAdded = %v", rule.Spec.Taint.TimeAdded)
	}
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, rule), nil)

	later := now.Add(time.Hour)
	s.now = func() time.Time { return later }
	effect := rule.DeepCopy()
	effect.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	s.PrepareForUpdate(ctx, effect, rule)
	if !effect.Spec.Taint.TimeAdded.Time.Equal(later.Truncate(time.Second)) {
		t.Errorf("timeAdded after an effect change = %v, want %v", effect.Spec.Taint.TimeAdded, later)
	}

	bad := rule.DeepCopy()
	bad.Spec.Taint.Effect = "PreferNoSchedule"
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, bad), []fieldErr{{field.ErrorTypeNotSupported, "spec.taint.effect"}})
	noKey := rule.DeepCopy()
	noKey.Spec.Taint.Key = ""
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, noKey), []fieldErr{{field.ErrorTypeInvalid, "spec.taint.key"}, {field.ErrorTypeInvalid, "spec.taint.key"}})

	rule.Status.Conditions = []metav1.Condition{{Type: "Testing", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: "E2E_test_running", Message: "m"}}
	registrytest.AssertErrs(t, r.Strategy.Validate(ctx, rule), nil)
	registrytest.AssertColumns(t, r, "Name", "Key", "Value", "Effect", "TimeAdded", "Age")
}

func TestResourceClaimPrint(t *testing.T) {
	r := registrytest.Find(t, Resources(), "resourceclaims")
	c := claim(exactRequest("req-0", "x"))
	c.CreationTimestamp = registrytest.ThreeDaysAgo()
	rows := map[string]func(*resourcev1.ResourceClaim){
		"pending":   func(*resourcev1.ResourceClaim) {},
		"allocated": func(c *resourcev1.ResourceClaim) { c.Status.Allocation = &resourcev1.AllocationResult{} },
		"allocated,reserved": func(c *resourcev1.ResourceClaim) {
			c.Status.Allocation = &resourcev1.AllocationResult{}
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Name: "p"}}
		},
		"deleted": func(c *resourcev1.ResourceClaim) { c.DeletionTimestamp = &metav1.Time{} },
	}
	for want, mutate := range rows {
		cc := c.DeepCopy()
		mutate(cc)
		if got := r.Printer.Row(cc); !reflect.DeepEqual(got, []interface{}{"c", want, "3d"}) {
			t.Errorf("row = %#v, want state %q", got, want)
		}
	}
}
