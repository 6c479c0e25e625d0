package kubelet

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/kubelet/volume"
)

// makeEnv resolves a container's environment as upstream's kubelet does: envFrom
// sources, then env entries (which override), each env value expanded against the
// service variables and the variables defined before it; then the service variables
// (see podServiceEnv) the container does not define itself.
func (kl *Kubelet) makeEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.KeyValue, error) {
	services, err := kl.podServiceEnv(ctx, pod)
	if err != nil {
		return nil, err
	}
	// vals holds every variable $(NAME) may refer to; declared lists the container's
	// own in the order it defines them.
	vals := make(map[string]string, len(services))
	for _, kv := range services {
		vals[kv[0]] = kv[1]
	}
	var order []string
	declared := map[string]bool{}
	set := func(k, v string) {
		if !declared[k] {
			declared[k] = true
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, from := range c.EnvFrom {
		data, err := kl.envSource(ctx, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			name := from.Prefix + k
			if name == "" || strings.Contains(name, "=") {
				continue // not a usable variable name; upstream skips it too
			}
			set(name, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expandVars(e.Value, vals))
			continue
		}
		v, ok, err := kl.envValueFrom(ctx, pod, c, e.ValueFrom, podIPs)
		if err != nil {
			return nil, err
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]*runtimeapi.KeyValue, 0, len(order)+len(services))
	for _, k := range order {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(vals[k])})
	}
	for _, kv := range services {
		if !declared[kv[0]] {
			declared[kv[0]] = true // two Services could render the same name
			out = append(out, &runtimeapi.KeyValue{Key: kv[0], Value: []byte(vals[kv[0]])})
		}
	}
	return out, nil
}

// envSource reads a whole ConfigMap or Secret for envFrom.
func (kl *Kubelet) envSource(ctx context.Context, ns string, from v1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := kl.volumeSources.ConfigMap(ctx, ns, from.ConfigMapRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("configmap %q not found", from.ConfigMapRef.Name)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := kl.volumeSources.Secret(ctx, ns, from.SecretRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("secret %q not found", from.SecretRef.Name)
		}
		out := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

func optional(b *bool) bool { return b != nil && *b }

// envValueFrom resolves one valueFrom; ok is false for a missing optional key.
func (kl *Kubelet) envValueFrom(ctx context.Context, pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource, podIPs []string) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := kl.podFieldValue(pod, src.FieldRef.FieldPath, podIPs)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := kl.resourceFieldValue(pod, c, src.ResourceFieldRef)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := kl.volumeSources.ConfigMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q not found", ref.Name)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return v, true, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := kl.volumeSources.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q not found", ref.Name)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	}
	return "", false, fmt.Errorf("env valueFrom has no source")
}

// podFieldValue resolves a downward-API field path.
func (kl *Kubelet) podFieldValue(pod *v1.Pod, path string, podIPs []string) (string, error) {
	if strings.HasPrefix(path, "metadata.") {
		return volume.MetadataField(pod, path)
	}
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return kl.opts.NodeIP, nil
	case "status.podIP":
		if len(podIPs) > 0 {
			return podIPs[0], nil
		}
		return "", nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", path)
}

// resourceFieldValue resolves a resourceFieldRef; an unset limit is the node's
// allocatable, and values are rounded up to whole divisors.
func (kl *Kubelet) resourceFieldValue(pod *v1.Pod, c *v1.Container, ref *v1.ResourceFieldSelector) (string, error) {
	target := c
	if ref.ContainerName != "" {
		if target = containerSpec(pod, ref.ContainerName); target == nil {
			return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || kind != "limits" && kind != "requests" {
		return "", fmt.Errorf("unsupported container resource: %s", ref.Resource)
	}
	res := v1.ResourceName(name)
	var q resource.Quantity
	if kind == "limits" {
		var has bool
		if q, has = target.Resources.Limits[res]; !has || q.IsZero() {
			q = kl.nodeAllocatable()[res]
		}
	} else {
		q = target.Resources.Requests[res]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if res == v1.ResourceCPU {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}

// expandVars replaces $(NAME) with defined variables' values and $$ with $, leaving
// undefined references as written, as the API documents for command, args and env.
func expandVars(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
