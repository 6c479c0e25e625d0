package core

import (
	"context"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

func nodesResource() *registry.Resource {
	doc := corev1.NodeSystemInfo{}.SwaggerDoc()
	addrDoc := corev1.NodeStatus{}.SwaggerDoc()["addresses"]
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "nodes",
		Kind:         "Node",
		SingularName: "node",
		ShortNames:   []string{"no"},
		New:          func() runtime.Object { return &corev1.Node{} },
		NewList:      func() runtime.Object { return &corev1.NodeList{} },
		Strategy: strategy[*corev1.Node]{
			defaults:       defaultNode,
			validate:       validateNode,
			validateUpdate: validateNodeUpdate,
		},
		Fields: func(obj runtime.Object) fields.Set {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return nil
			}
			return fields.Set{"spec.unschedulable": strconv.FormatBool(n.Spec.Unschedulable)}
		},
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Status", "string", "The status of the node"),
			column("Roles", "string", "The roles of the node"),
			registry.AgeColumn,
			column("Version", "string", doc["kubeletVersion"]),
			wideColumn("Internal-IP", "string", addrDoc),
			wideColumn("External-IP", "string", addrDoc),
			wideColumn("OS-Image", "string", doc["osImage"]),
			wideColumn("Kernel-Version", "string", doc["kernelVersion"]),
			wideColumn("Container-Runtime", "string", doc["containerRuntimeVersion"]),
		}, nodeRow),
		HasStatus: true,
	}
}

// defaultNode fills allocatable from capacity when the kubelet reports only
// capacity, and keeps podCIDR and podCIDRs in step.
func defaultNode(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
	if n.Spec.PodCIDR != "" && len(n.Spec.PodCIDRs) == 0 {
		n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
	} else if n.Spec.PodCIDR == "" && len(n.Spec.PodCIDRs) > 0 {
		n.Spec.PodCIDR = n.Spec.PodCIDRs[0]
	}
	roundResourceList(n.Status.Capacity)
	roundResourceList(n.Status.Allocatable)
}

func validateNode(_ context.Context, n *corev1.Node) field.ErrorList {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validateTaints(n.Spec.Taints, specPath.Child("taints"))...)

	cidrPath := specPath.Child("podCIDRs")
	for i, c := range n.Spec.PodCIDRs {
		errs = append(errs, validation.IsValidCIDR(cidrPath.Index(i), c)...)
	}
	if len(n.Spec.PodCIDRs) > 1 && !isDualStackPair(n.Spec.PodCIDRs) {
		errs = append(errs, field.Invalid(cidrPath, n.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
	}
	if n.Spec.PodCIDR != "" && (len(n.Spec.PodCIDRs) == 0 || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR) {
		errs = append(errs, field.Invalid(specPath.Child("podCIDR"), n.Spec.PodCIDR, "must match the first element of podCIDRs"))
	}
	statusPath := field.NewPath("status")
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"capacity", n.Status.Capacity}, {"allocatable", n.Status.Allocatable}} {
		for _, name := range sortedResourceNames(list.rl) {
			errs = append(errs, validateNonNegativeQuantity(list.rl[name], statusPath.Child(list.name).Key(string(name)))...)
		}
	}
	return errs
}

func isDualStackPair(cidrs []string) bool {
	if len(cidrs) != 2 {
		return false
	}
	v4 := 0
	for _, c := range cidrs {
		ip, _, err := net.ParseCIDR(c)
		if err != nil {
			return false
		}
		if ip.To4() != nil {
			v4++
		}
	}
	return v4 == 1
}

func validateTaints(taints []corev1.Taint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.TaintEffect]sets.Set[string]{}
	for i, t := range taints {
		idxPath := fldPath.Index(i)
		errs = append(errs, validname.ValidateLabelName(t.Key, idxPath.Child("key"))...)
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(idxPath.Child("value"), t.Value, msg))
		}
		errs = append(errs, validateTaintEffect(t.Effect, false, idxPath.Child("effect"))...)
		if seen[t.Effect].Has(t.Key) {
			dup := field.Duplicate(idxPath, t)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if seen[t.Effect] == nil {
			seen[t.Effect] = sets.New[string]()
		}
		seen[t.Effect].Insert(t.Key)
	}
	return errs
}

// validateNodeUpdate keeps the pod CIDRs and provider ID once they are set.
func validateNodeUpdate(_ context.Context, n, old *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	if len(old.Spec.PodCIDRs) > 0 && !equality.Semantic.DeepEqual(n.Spec.PodCIDRs, old.Spec.PodCIDRs) {
		// Adding the second family's CIDR to a single-stack node is allowed.
		if len(n.Spec.PodCIDRs) < len(old.Spec.PodCIDRs) || n.Spec.PodCIDRs[0] != old.Spec.PodCIDRs[0] {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
		}
	}
	if old.Spec.ProviderID != "" && n.Spec.ProviderID != old.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	return errs
}

const (
	nodeRoleLabelPrefix = "node-role.kubernetes.io/"
	nodeRoleLabel       = "kubernetes.io/role"
)

// nodeRow prints STATUS from the Ready condition (plus SchedulingDisabled when
// cordoned) and ROLES from the node-role labels.
func nodeRow(n *corev1.Node) []interface{} {
	var status []string
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = append(status, "Ready")
			} else {
				status = append(status, "NotReady")
			}
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if n.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}

	roles := sets.New[string]()
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, nodeRoleLabelPrefix):
			if role := strings.TrimPrefix(k, nodeRoleLabelPrefix); role != "" {
				roles.Insert(role)
			}
		case k == nodeRoleLabel && v != "":
			roles.Insert(v)
		}
	}
	info := n.Status.NodeInfo
	unknownIfEmpty := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	return []interface{}{
		n.Name, strings.Join(status, ","), noneIfEmpty(strings.Join(sets.List(roles), ",")),
		registry.Age(n.CreationTimestamp), info.KubeletVersion,
		nodeAddress(n, corev1.NodeInternalIP), nodeAddress(n, corev1.NodeExternalIP),
		unknownIfEmpty(info.OSImage), unknownIfEmpty(info.KernelVersion), unknownIfEmpty(info.ContainerRuntimeVersion),
	}
}

func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

// sortedResourceNames orders a resource list's names so errors come out stable.
func sortedResourceNames(rl corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}
