// Package componentstatus computes the legacy core/v1 ComponentStatus objects
// (kubectl get componentstatuses): on each read the apiserver probes the scheduler,
// the controller manager and its store, as upstream's componentstatus REST does.
// Nothing is stored.
package componentstatus

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Timeout bounds each probe. Upstream waits up to 20 s; a short bound keeps
// kubectl get cs responsive when a component hangs.
const Timeout = 2 * time.Second

// maxBody is how much of a healthz body becomes the message, as upstream's prober reads.
const maxBody = 10 * 1024

// Component is one probed component: its ComponentStatus name and its check.
type Component struct {
	Name  string
	Probe func(ctx context.Context) corev1.ComponentCondition
}

// Defaults are the components upstream's apiserver reports: the scheduler and the
// controller manager on their secure ports on localhost, and etcd through revision,
// the store's current-revision read.
func Defaults(revision func(ctx context.Context) (int64, error)) []Component {
	return []Component{
		{Name: "scheduler", Probe: func(ctx context.Context) corev1.ComponentCondition {
			return ProbeHealthz(ctx, "https://127.0.0.1:10259/healthz")
		}},
		{Name: "controller-manager", Probe: func(ctx context.Context) corev1.ComponentCondition {
			return ProbeHealthz(ctx, "https://127.0.0.1:10257/healthz")
		}},
		{Name: "etcd-0", Probe: func(ctx context.Context) corev1.ComponentCondition {
			return ProbeStore(ctx, revision)
		}},
	}
}

// ProbeHealthz GETs url over TLS without verifying the server's certificate, as
// upstream probes the components. Healthy when it answers 2xx or 3xx, with the body as
// the message; a failed request or another status is unhealthy with the failure as
// the message and no error, as upstream's HTTP prober reports it.
func ProbeHealthz(ctx context.Context, url string) corev1.ComponentCondition {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	unhealthy := func(msg string) corev1.ComponentCondition {
		return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Message: msg}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionUnknown, Error: err.Error()}
	}
	req.Header.Set("Accept", "*/*")
	req.Header.Set("User-Agent", "kube-probe")
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream probes components
		DisableKeepAlives: true,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return unhealthy(err.Error())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return unhealthy(err.Error())
	}
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return unhealthy(fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode))
	}
	return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: string(body)}
}

// ProbeStore is healthy, with message "ok", when the store answers a current-revision
// read; otherwise unhealthy with the failure as the error, as upstream's etcd check.
func ProbeStore(ctx context.Context, revision func(ctx context.Context) (int64, error)) corev1.ComponentCondition {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if _, err := revision(ctx); err != nil {
		return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
	}
	return corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}
}

// Status probes one component.
func Status(ctx context.Context, c Component) *corev1.ComponentStatus {
	cs := &corev1.ComponentStatus{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name},
		Conditions: []corev1.ComponentCondition{c.Probe(ctx)},
	}
	cs.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ComponentStatus"))
	return cs
}

// Statuses probes the components concurrently and returns their statuses by name.
func Statuses(ctx context.Context, components []Component) []*corev1.ComponentStatus {
	out := make([]*corev1.ComponentStatus, len(components))
	var wg sync.WaitGroup
	for i, c := range components {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = Status(ctx, c)
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Columns are upstream's table columns for componentstatuses.
func Columns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"},
		{Name: "Status", Type: "string", Description: "Status of the component conditions"},
		{Name: "Message", Type: "string", Description: "Message of the component conditions"},
		{Name: "Error", Type: "string", Description: "Error of the component conditions"},
	}
}

// Row is a ComponentStatus's table row: name, Healthy/Unhealthy (Unknown without a
// Healthy condition), and that condition's message and error, as upstream prints it.
func Row(obj runtime.Object) []interface{} {
	cs, ok := obj.(*corev1.ComponentStatus)
	if !ok {
		return []interface{}{"", "Unknown", "", ""}
	}
	status, message, errMsg := "Unknown", "", ""
	for _, c := range cs.Conditions {
		if c.Type != corev1.ComponentHealthy {
			continue
		}
		status = "Unhealthy"
		if c.Status == corev1.ConditionTrue {
			status = "Healthy"
		}
		message, errMsg = c.Message, c.Error
		break
	}
	return []interface{}{cs.Name, status, message, errMsg}
}
