package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/controlplane/core"
	"mizzen/internal/flightrecorder"
	"mizzen/internal/testing/apiserver"
)

func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "demo"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}},
	}
}

func newDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}},
			},
		},
	}
}

// rawRequest sends a request with the admin credentials and returns status and body.
func rawRequest(t *testing.T, cfg *rest.Config, method, path, contentType string, body []byte, headers ...string) (int, []byte, http.Header) {
	t.Helper()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, cfg.Host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data, resp.Header
}

func decodeStatus(t *testing.T, data []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("response is not a metav1.Status: %v %s", err, data)
	}
	return st
}

func TestAPIMachinery(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	pods := c.CoreV1().Pods("default")

	t.Run("optimistic concurrency", func(t *testing.T) {
		p, err := pods.Create(ctx, newPod("conflict"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.UID == "" || p.CreationTimestamp.IsZero() || p.ResourceVersion == "" {
			t.Fatalf("system fields not set: %+v", p.ObjectMeta)
		}
		stale := p.DeepCopy()
		p.Labels["v"] = "2"
		if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		stale.Labels["v"] = "3"
		_, err = pods.Update(ctx, stale, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			t.Fatalf("stale update: got %v, want 409 Conflict", err)
		}
		if _, err := pods.Create(ctx, newPod("conflict"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("second create: got %v, want AlreadyExists", err)
		}
	})

	t.Run("generateName", func(t *testing.T) {
		p := newPod("")
		p.GenerateName = "gen-"
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got.Name, "gen-") || len(got.Name) != len("gen-")+5 {
			t.Fatalf("generated name %q", got.Name)
		}
	})

	t.Run("generation follows spec changes", func(t *testing.T) {
		d, err := c.AppsV1().Deployments("default").Create(ctx, newDeployment("gen", 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Generation != 1 {
			t.Fatalf("generation on create = %d", d.Generation)
		}
		d.Labels = map[string]string{"only": "metadata"}
		d, _ = c.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
		if d.Generation != 1 {
			t.Fatalf("metadata change bumped generation to %d", d.Generation)
		}
		d.Spec.Replicas = ptr(int32(3))
		d, _ = c.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
		if d.Generation != 2 {
			t.Fatalf("spec change: generation %d, want 2", d.Generation)
		}
	})

	t.Run("status is kept apart from spec", func(t *testing.T) {
		d, err := c.AppsV1().Deployments("default").Create(ctx, newDeployment("split", 2), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Status.Replicas = 7
		d.Spec.Replicas = ptr(int32(9))
		d, err = c.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.Replicas != 7 || *d.Spec.Replicas != 2 {
			t.Fatalf("status update: status %d spec %d, want 7 and 2", d.Status.Replicas, *d.Spec.Replicas)
		}
		d.Status.Replicas = 1
		d, _ = c.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
		if d.Status.Replicas != 7 {
			t.Fatalf("main update changed status to %d", d.Status.Replicas)
		}
	})

	t.Run("scale subresource", func(t *testing.T) {
		if _, err := c.AppsV1().Deployments("default").Create(ctx, newDeployment("scaled", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sc, err := c.AppsV1().Deployments("default").GetScale(ctx, "scaled", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Spec.Replicas != 1 || sc.Status.Selector != "app=scaled" {
			t.Fatalf("scale: %+v", sc)
		}
		sc.Spec.Replicas = 5
		if _, err := c.AppsV1().Deployments("default").UpdateScale(ctx, "scaled", sc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		d, _ := c.AppsV1().Deployments("default").Get(ctx, "scaled", metav1.GetOptions{})
		if *d.Spec.Replicas != 5 {
			t.Fatalf("replicas after scale %d", *d.Spec.Replicas)
		}
		_, err = c.AppsV1().Deployments("default").Patch(ctx, "scaled", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}, "scale")
		if err != nil {
			t.Fatal(err)
		}
		var scale autoscalingv1.Scale
		_ = scale
		d, _ = c.AppsV1().Deployments("default").Get(ctx, "scaled", metav1.GetOptions{})
		if *d.Spec.Replicas != 2 {
			t.Fatalf("replicas after scale patch %d", *d.Spec.Replicas)
		}
	})

	t.Run("binding", func(t *testing.T) {
		created, err := pods.Create(ctx, newPod("tobind"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A nomination, as the scheduler's preemption leaves one.
		created.Status.NominatedNodeName = "node-1"
		if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "tobind", Labels: map[string]string{"topology.kubernetes.io/zone": "z1"}},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
		if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p, _ := pods.Get(ctx, "tobind", metav1.GetOptions{})
		if p.Spec.NodeName != "node-1" {
			t.Fatalf("nodeName %q", p.Spec.NodeName)
		}
		if p.Status.NominatedNodeName != "" {
			t.Errorf("nominatedNodeName %q after binding, want it cleared", p.Status.NominatedNodeName)
		}
		if p.Labels["topology.kubernetes.io/zone"] != "z1" {
			t.Errorf("labels %v: the binding's label is not on the pod", p.Labels)
		}
		p.Status.NominatedNodeName = "node-2"
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("nominating a bound pod: %v, want Invalid", err)
		}
		gated := newPod("gated")
		gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		if _, err := pods.Create(ctx, gated, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err = pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "gated"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "non-empty .spec.schedulingGates") {
			t.Errorf("binding a gated pod: %v, want Conflict", err)
		}
		scheduled := false
		for _, cond := range p.Status.Conditions {
			scheduled = scheduled || (cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue)
		}
		if !scheduled {
			t.Errorf("PodScheduled condition missing: %+v", p.Status.Conditions)
		}
		b.Target.Name = "node-2"
		if err := pods.Bind(ctx, b, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("second bind: %v, want Conflict", err)
		}
	})

	t.Run("graceful pod deletion", func(t *testing.T) {
		if _, err := pods.Create(ctx, newPod("graceful"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_ = pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "graceful"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n"}}, metav1.CreateOptions{})
		if err := pods.Delete(ctx, "graceful", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		p, err := pods.Get(ctx, "graceful", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("a bound pod must stay until its kubelet confirms: %v", err)
		}
		if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
			t.Fatalf("deletion fields: %v %v", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
		}
		if err := pods.Delete(ctx, "graceful", *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(ctx, "graceful", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("after delete with grace 0: %v", err)
		}
	})

	t.Run("finalizers hold deletion", func(t *testing.T) {
		p := newPod("finalized")
		p.Finalizers = []string{"example.com/hold"}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(ctx, "finalized", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := pods.Get(ctx, "finalized", metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp == nil {
			t.Fatalf("object with a finalizer: %v %v", err, got)
		}
		if _, err := pods.Patch(ctx, "finalized", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(ctx, "finalized", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("after removing the last finalizer: %v", err)
		}
	})

	t.Run("dry run writes nothing", func(t *testing.T) {
		if _, err := pods.Create(ctx, newPod("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("dry-run create stored the object: %v", err)
		}
	})

	t.Run("selectors and pagination", func(t *testing.T) {
		ns := "default"
		for i := 0; i < 12; i++ {
			p := newPod(fmt.Sprintf("page-%02d", i))
			p.Labels = map[string]string{"page": "yes", "parity": fmt.Sprint(i % 2)}
			if _, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "page=yes,parity=1"})
		if err != nil || len(list.Items) != 6 {
			t.Fatalf("label selector: %v, %d items", err, len(list.Items))
		}
		list, err = pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1"})
		if err != nil || len(list.Items) != 1 || list.Items[0].Name != "tobind" {
			t.Fatalf("field selector: %v %v", err, list)
		}
		if _, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=x"}); !apierrors.IsBadRequest(err) {
			t.Fatalf("unsupported field: %v", err)
		}
		var names []string
		opts := metav1.ListOptions{LabelSelector: "page=yes", Limit: 5}
		pages := 0
		for {
			page, err := pods.List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, p := range page.Items {
				names = append(names, p.Name)
			}
			if page.Continue == "" {
				break
			}
			opts.Continue = page.Continue
		}
		if pages != 3 || len(names) != 12 || names[0] != "page-00" || names[11] != "page-11" {
			t.Fatalf("pagination: %d pages, names %v", pages, names)
		}
	})

	t.Run("watch from a resource version", func(t *testing.T) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		p, _ := pods.Create(ctx, newPod("watched"), metav1.CreateOptions{})
		p.Labels["x"] = "y"
		_, _ = pods.Update(ctx, p, metav1.UpdateOptions{})
		_ = pods.Delete(ctx, "watched", metav1.DeleteOptions{})
		var got []string
		timeout := time.After(10 * time.Second)
		for len(got) < 3 {
			select {
			case ev := <-w.ResultChan():
				got = append(got, fmt.Sprintf("%s %s", ev.Type, ev.Object.(*corev1.Pod).Name))
			case <-timeout:
				t.Fatalf("watch saw only %v", got)
			}
		}
		if want := []string{"ADDED watched", "MODIFIED watched", "DELETED watched"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("watch events %v, want %v", got, want)
		}
	})

	t.Run("watch leaving a selector is a delete", func(t *testing.T) {
		w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "mood=happy"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		p := newPod("moody")
		p.Labels["mood"] = "happy"
		p, _ = pods.Create(ctx, p, metav1.CreateOptions{})
		p.Labels["mood"] = "sad"
		_, _ = pods.Update(ctx, p, metav1.UpdateOptions{})
		var types []watch.EventType
		for len(types) < 2 {
			select {
			case ev := <-w.ResultChan():
				types = append(types, ev.Type)
			case <-time.After(10 * time.Second):
				t.Fatalf("saw %v", types)
			}
		}
		if types[0] != watch.Added || types[1] != watch.Deleted {
			t.Fatalf("events %v, want ADDED then DELETED", types)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestBadInput: malformed requests get a 4xx metav1.Status and change nothing.
func TestBadInput(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	big := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big","annotations":{"a":"` + strings.Repeat("x", 3<<20) + `"}}}`
	cases := []struct {
		name, method, path, contentType, body string
		code                                  int
		reason                                metav1.StatusReason
		message                               string
	}{
		{"malformed JSON", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1","kind":"Pod",`, 400, metav1.StatusReasonBadRequest, ""},
		{"malformed YAML", "POST", "/api/v1/namespaces/default/pods", "application/yaml", "apiVersion: v1\nkind: Pod\n  metadata: : x", 400, metav1.StatusReasonBadRequest, ""},
		{"wrong apiVersion", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"apps/v1","kind":"Pod","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, "does not match the expected API version"},
		{"wrong kind", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"invalid name", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"missing image", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"noimage"},"spec":{"containers":[{"name":"c"}]}}`, 422, metav1.StatusReasonInvalid, "spec.containers[0].image"},
		{"unknown field under Strict", "POST", "/api/v1/namespaces/default/pods?fieldValidation=Strict", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"strict"},"spec":{"bogus":1,"containers":[{"name":"c","image":"i"}]}}`, 400, metav1.StatusReasonBadRequest, `unknown field "spec.bogus"`},
		{"body over 3 MiB", "POST", "/api/v1/namespaces/default/pods", "application/json", big, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"unsupported media type", "POST", "/api/v1/namespaces/default/pods", "text/plain", `hello`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"bad patch", "PATCH", "/api/v1/namespaces/default/pods/none", "application/json-patch+json", `[{"op":"replace"`, 404, metav1.StatusReasonNotFound, ""},
		{"no such resource", "GET", "/api/v1/namespaces/default/widgets", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"bad label selector", "GET", "/api/v1/pods?labelSelector=a%3D%3D%3Db", "", "", 400, metav1.StatusReasonBadRequest, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, data, _ := rawRequest(t, cfg, tc.method, tc.path, tc.contentType, []byte(tc.body))
			if code != tc.code {
				t.Fatalf("status %d, want %d: %s", code, tc.code, data)
			}
			st := decodeStatus(t, data)
			if st.Reason != tc.reason || int(st.Code) != tc.code {
				t.Errorf("status reason %q code %d, want %q %d", st.Reason, st.Code, tc.reason, tc.code)
			}
			if tc.message != "" && !strings.Contains(st.Message, tc.message) {
				t.Errorf("message %q lacks %q", st.Message, tc.message)
			}
		})
	}
	list, err := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("bad requests wrote something: %v %d pods", err, len(list.Items))
	}
	// Warn (the default) accepts unknown fields and says so.
	code, _, hdr := rawRequest(t, cfg, "POST", "/api/v1/namespaces/default/pods", "application/json",
		[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"warned"},"spec":{"bogus":1,"containers":[{"name":"c","image":"i"}]}}`))
	if code != 201 || !strings.Contains(hdr.Get("Warning"), `unknown field \"spec.bogus\"`) {
		t.Fatalf("fieldValidation=Warn: %d, Warning %q", code, hdr.Get("Warning"))
	}
	// Anonymous requests are system:anonymous, whom RBAC lets read health and version only.
	anon := rest.AnonymousClientConfig(cfg)
	for path, want := range map[string]int{"/api/v1/pods": 403, "/readyz": 200, "/healthz": 200, "/livez": 200, "/version": 200} {
		code, _, _ := rawRequest(t, anon, "GET", path, "", nil)
		if code != want {
			t.Errorf("anonymous GET %s: %d, want %d", path, code, want)
		}
	}
}

// TestServerSidePrinting: kubectl's Table request gets upstream's columns.
func TestServerSidePrinting(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	if _, err := c.CoreV1().Pods("default").Create(context.Background(), newPod("printed"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, data, hdr := rawRequest(t, cfg, "GET", "/api/v1/namespaces/default/pods", "", nil,
		"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	if code != 200 {
		t.Fatalf("%d %s", code, data)
	}
	var table metav1.Table
	if err := json.Unmarshal(data, &table); err != nil || table.Kind != "Table" {
		t.Fatalf("not a Table (%s): %v %.200s", hdr.Get("Content-Type"), err, data)
	}
	var cols []string
	for _, col := range table.ColumnDefinitions {
		cols = append(cols, col.Name)
	}
	if got := strings.Join(cols, ","); !strings.HasPrefix(got, "Name,Ready,Status,Restarts,Age") {
		t.Errorf("columns %s", got)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "printed" || table.Rows[0].Cells[2] != "Pending" {
		t.Errorf("rows %+v", table.Rows)
	}
}

// TestServiceAllocationsFollowUpdates: a service that becomes NodePort gets node ports,
// one that becomes ExternalName frees its cluster IP for others.
func TestServiceAllocationsFollowUpdates(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	svcs := c.CoreV1().Services("default")
	svc, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := svc.Spec.ClusterIP
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc, err = svcs.Update(ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := svc.Spec.Ports[0].NodePort; p < 30000 || p > 32767 {
		t.Fatalf("NodePort service got node port %d", p)
	}
	if svc.Spec.ClusterIP != ip {
		t.Fatalf("cluster IP changed from %s to %s", ip, svc.Spec.ClusterIP)
	}
	// Another service cannot take the same node port.
	_, err = svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "thief"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, NodePort: svc.Spec.Ports[0].NodePort}}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("second service on the same node port: %v, want Invalid", err)
	}
	// ExternalName frees the cluster IP: a new service may ask for it by address.
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "reuse"},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the freed address %s is not available again: %v", ip, err)
	}
}

// TestEvictionRespectsBudgets: an eviction that would break a PodDisruptionBudget is
// refused with 429; one the budget allows deletes the pod.
func TestEvictionRespectsBudgets(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	pods := c.CoreV1().Pods("default")
	for _, name := range []string{"a", "b"} {
		p, err := pods.Create(ctx, newPod(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	one := intstr.FromInt32(1)
	pdb, err := c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "budget"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the disruption controller would write: one disruption allowed.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
	if _, err := c.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	if err := evict("a"); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	if _, err := pods.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("evicted pod still there: %v", err)
	}
	err = evict("b")
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction beyond the budget: %v, want 429", err)
	}
	if _, err := pods.Get(ctx, "b", metav1.GetOptions{}); err != nil {
		t.Fatalf("a refused eviction deleted the pod: %v", err)
	}
}

// TestEvictionMarksThePod: an evicted pod carries upstream's DisruptionTarget condition
// as it goes (seen here because a finalizer holds it), so a Job's pod failure policy can
// tell an eviction from a failure of its own.
func TestEvictionMarksThePod(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	pods := c.CoreV1().Pods("default")
	held := newPod("held")
	held.Finalizers = []string{"example.com/hold"}
	if _, err := pods.Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
			found = &p.Status.Conditions[i]
		}
	}
	if p.DeletionTimestamp == nil || found == nil || found.Status != corev1.ConditionTrue ||
		found.Reason != "EvictionByEvictionAPI" || found.Message != "Eviction API: evicting" {
		t.Fatalf("evicted pod: deletionTimestamp %v, DisruptionTarget %+v", p.DeletionTimestamp, found)
	}
	p.Finalizers = nil
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestListFormatsAgree: the same list as JSON (joined from cached encodings), YAML and
// protobuf says the same thing.
func TestListFormatsAgree(t *testing.T) {
	cfg := apiserver.Start(t)
	ctx := context.Background()
	proto := kubernetes.NewForConfigOrDie(cfg)
	for i := 0; i < 5; i++ {
		if _, err := proto.CoreV1().Pods("default").Create(ctx, newPod(fmt.Sprintf("fmt-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = "application/json", "application/json"
	names := func(l *corev1.PodList) string {
		var out []string
		for _, p := range l.Items {
			out = append(out, p.Name+"@"+p.ResourceVersion+"/"+string(p.UID))
		}
		return strings.Join(out, ",") + " rv=" + l.ResourceVersion
	}
	// Consistent reads: resourceVersion "0" may answer from a cache that has not seen the
	// creates yet, as upstream's may.
	a, err := proto.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := kubernetes.NewForConfigOrDie(jsonCfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if names(a) != names(b) || len(b.Items) != 5 || b.Items[0].Spec.Containers[0].Image != "img:1" {
		t.Fatalf("protobuf list %s\nJSON list %s", names(a), names(b))
	}
	code, body, hdr := rawRequest(t, cfg, "GET", "/api/v1/namespaces/default/pods", "", nil, "Accept", "application/yaml")
	if code != 200 || hdr.Get("Content-Type") != "application/yaml" || !strings.Contains(string(body), "kind: PodList") || !strings.Contains(string(body), "name: fmt-4") {
		t.Fatalf("YAML list: %d %s %.300s", code, hdr.Get("Content-Type"), body)
	}
}

// TestRequestMetrics: /metrics counts resource requests under upstream's names, verbs
// and scopes (what the API call latency SLOs are measured from), and is the admin's
// to read, not an anonymous caller's.
func TestRequestMetrics(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := c.CoreV1().Pods("default").Create(ctx, newPod("counted"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("default").Get(ctx, "counted", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	code, data, _ := rawRequest(t, cfg, "GET", "/metrics", "", nil)
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s", code, data)
	}
	for _, want := range []string{
		`apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 1`,
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 1`,
		`apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 1`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _, _ := rawRequest(t, rest.AnonymousClientConfig(cfg), "GET", "/metrics", "", nil); code != 403 {
		t.Errorf("anonymous GET /metrics: %d, want 403", code)
	}
}

// TestProfiling: with --profiling, /debug/pprof/ serves Go's profiles to the admin and
// refuses an anonymous caller, as kube-apiserver's; without it the path is not found.
func TestProfiling(t *testing.T) {
	cfg := apiserver.StartWithOptions(t, func(o *core.Options) { o.Profiling = true }).AdminConfig
	code, data, _ := rawRequest(t, cfg, "GET", "/debug/pprof/heap?debug=1", "", nil)
	if code != 200 || !strings.Contains(string(data), "heap profile") {
		t.Fatalf("GET /debug/pprof/heap: %d %.200s", code, data)
	}
	if code, _, _ := rawRequest(t, rest.AnonymousClientConfig(cfg), "GET", "/debug/pprof/heap", "", nil); code != 403 {
		t.Errorf("anonymous GET /debug/pprof/heap: %d, want 403", code)
	}
	if code, _, _ := rawRequest(t, apiserver.Start(t), "GET", "/debug/pprof/heap", "", nil); code != 404 {
		t.Errorf("GET /debug/pprof/heap without profiling: %d, want 404", code)
	}
}

// TestFlightRecorder: with --flight-recorder-window, the admin gets the recorded window
// as a Go execution trace beside the profiles; an anonymous caller is refused as for
// the profiles; without a recorder the path is not found.
func TestFlightRecorder(t *testing.T) {
	recorder, err := flightrecorder.Start(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer recorder.Stop()
	cfg := apiserver.StartWithOptions(t, func(o *core.Options) { o.Profiling, o.FlightRecorder = true, recorder }).AdminConfig
	code, data, _ := rawRequest(t, cfg, "GET", flightrecorder.Path, "", nil)
	if code != 200 || !bytes.HasPrefix(data, []byte("go 1.")) {
		t.Fatalf("GET %s: %d %.40q", flightrecorder.Path, code, data)
	}
	if code, _, _ := rawRequest(t, rest.AnonymousClientConfig(cfg), "GET", flightrecorder.Path, "", nil); code != 403 {
		t.Errorf("anonymous GET %s: %d, want 403", flightrecorder.Path, code)
	}
	withoutRecorder := apiserver.StartWithOptions(t, func(o *core.Options) { o.Profiling = true }).AdminConfig
	if code, _, _ := rawRequest(t, withoutRecorder, "GET", flightrecorder.Path, "", nil); code != 404 {
		t.Errorf("GET %s without a recorder: %d, want 404", flightrecorder.Path, code)
	}
}
