package core_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// These tests run the core/v1 registry behind a real mizzen apiserver and check
// what a client sees: defaulted objects, validation errors as Status causes,
// field selectors, subresources and server-side tables.

func startClient(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	return kubernetes.NewForConfigOrDie(apiserver.Start(t))
}

// wantInvalid checks a 422 Invalid error carrying exactly the given cause.
func wantInvalid(t *testing.T, err error, field string, causeType metav1.CauseType, messagePart string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want 422 Invalid", err)
	}
	status := err.(apierrors.APIStatus).Status()
	for _, c := range status.Details.Causes {
		if c.Field == field && c.Type == causeType && strings.Contains(c.Message, messagePart) {
			return
		}
	}
	t.Errorf("causes = %+v, want %s %s containing %q", status.Details.Causes, field, causeType, messagePart)
}

func TestIntegrationCoreV1(t *testing.T) {
	c := startClient(t)
	ctx := context.Background()

	t.Run("pod create is defaulted and Pending", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
		got, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := got.Spec
		if s.RestartPolicy != corev1.RestartPolicyAlways || s.DNSPolicy != corev1.DNSClusterFirst || s.SchedulerName != "default-scheduler" ||
			*s.TerminationGracePeriodSeconds != 30 || !*s.EnableServiceLinks || s.Containers[0].ImagePullPolicy != corev1.PullAlways ||
			s.Containers[0].Ports[0].Protocol != corev1.ProtocolTCP || s.Containers[0].TerminationMessagePath != "/dev/termination-log" {
			t.Errorf("pod spec not defaulted as upstream: %+v", s)
		}
		if got.Status.Phase != corev1.PodPending || got.Status.QOSClass != corev1.PodQOSBestEffort {
			t.Errorf("status = %+v, want Pending and BestEffort", got.Status)
		}
	})

	t.Run("pod without image is rejected", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "noimage"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		_, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		wantInvalid(t, err, "spec.containers[0].image", metav1.CauseTypeFieldValueRequired, "Required value")
	})

	t.Run("pod update may change only the image", func(t *testing.T) {
		pod, err := c.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.Containers[0].Image = "nginx:1.27"
		if pod, err = c.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("image update: %v", err)
		}
		pod.Spec.Containers[0].Ports[0].ContainerPort = 8080
		_, err = c.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{})
		wantInvalid(t, err, "spec", metav1.CauseTypeForbidden, "pod updates may not change fields other than")
	})

	t.Run("pod status write ignores the spec and checks only the status", func(t *testing.T) {
		pod, err := c.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		image := pod.Spec.Containers[0].Image
		pod.Spec.Containers[0].Image = "other:1"
		pod.Spec.Containers[0].Ports[0].ContainerPort = 9999 // a change a spec update may not make
		pod.Status.PodIP = "10.1.0.7"
		got, err := c.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("status update: %v", err)
		}
		if got.Spec.Containers[0].Image != image || got.Spec.Containers[0].Ports[0].ContainerPort != 80 || got.Generation != pod.Generation {
			t.Errorf("spec changed through the status: image %q port %d generation %d", got.Spec.Containers[0].Image, got.Spec.Containers[0].Ports[0].ContainerPort, got.Generation)
		}
		if got.Status.PodIP != "10.1.0.7" || len(got.Status.PodIPs) != 1 {
			t.Errorf("status = %+v, want podIP 10.1.0.7", got.Status)
		}
		got.Status.PodIP, got.Status.PodIPs = "pod", nil
		_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, got, metav1.UpdateOptions{})
		wantInvalid(t, err, "status.podIPs[0]", metav1.CauseTypeFieldValueInvalid, "must be a valid IP address")
		_, err = c.CoreV1().Pods("default").Patch(ctx, "web", types.StrategicMergePatchType, []byte(`{"status":{"qosClass":"Guaranteed"}}`), metav1.PatchOptions{}, "status")
		wantInvalid(t, err, "status.qosClass", metav1.CauseTypeFieldValueInvalid, "field is immutable")
	})

	t.Run("back-to-back status writes: the latest version succeeds, a stale one conflicts", func(t *testing.T) {
		pod, err := c.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale := pod.DeepCopy()
		for i := range 5 {
			pod.Status.Message = fmt.Sprint("write ", i)
			if pod, err = c.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("write %d at the version just returned: %v", i, err)
			}
		}
		stale.Status.Message = "stale"
		if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("write at a stale resourceVersion: %v, want 409 Conflict", err)
		}
		got, err := c.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Message == "stale" {
			t.Errorf("the stale write was stored")
		}
	})

	t.Run("pods get the global default priority class of the moment", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prio"}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		newPod := func(name string) *corev1.Pod {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
			got, err := c.CoreV1().Pods("prio").Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if pod := newPod("prio-1"); pod.Spec.PriorityClassName != "" || *pod.Spec.Priority != 0 {
			t.Errorf("without a default: class %q priority %d", pod.Spec.PriorityClassName, *pod.Spec.Priority)
		}
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "everyone"}, Value: 77, GlobalDefault: true}
		if _, err := c.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if pod := newPod("prio-2"); pod.Spec.PriorityClassName != "everyone" || *pod.Spec.Priority != 77 {
			t.Errorf("with a default: class %q priority %d, want everyone 77", pod.Spec.PriorityClassName, *pod.Spec.Priority)
		}
		if err := c.SchedulingV1().PriorityClasses().Delete(ctx, "everyone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if pod := newPod("prio-3"); pod.Spec.PriorityClassName != "" || *pod.Spec.Priority != 0 {
			t.Errorf("after the default went: class %q priority %d", pod.Spec.PriorityClassName, *pod.Spec.Priority)
		}
	})

	t.Run("pod field selectors", func(t *testing.T) {
		for _, tc := range []struct {
			selector string
			want     int
		}{{"status.phase=Pending", 1}, {"spec.restartPolicy=Never", 0}, {"spec.nodeName=", 1}} {
			list, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if err != nil {
				t.Fatalf("%s: %v", tc.selector, err)
			}
			if len(list.Items) != tc.want {
				t.Errorf("%s matched %d pods, want %d", tc.selector, len(list.Items), tc.want)
			}
		}
	})

	t.Run("pods table", func(t *testing.T) {
		table := &metav1.Table{}
		err := c.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(table)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, col := range table.ColumnDefinitions {
			names = append(names, col.Name)
		}
		if want := []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"}; !slices.Equal(names, want) {
			t.Errorf("columns = %v, want %v", names, want)
		}
		if len(table.Rows) != 1 || table.Rows[0].Cells[1] != "0/1" || table.Rows[0].Cells[2] != "Pending" || table.Rows[0].Cells[6] != "<none>" {
			t.Errorf("rows = %+v", table.Rows)
		}
	})

	t.Run("service defaults and node port range", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
		got, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := got.Spec.Ports[0]
		if p.Protocol != corev1.ProtocolTCP || p.TargetPort != intstr.FromInt32(80) || p.NodePort < 30000 || p.NodePort > 32767 {
			t.Errorf("port = %+v", p)
		}
		if got.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || got.Spec.SessionAffinity != corev1.ServiceAffinityNone ||
			len(got.Spec.ClusterIPs) != 1 || got.Spec.ClusterIPs[0] != got.Spec.ClusterIP || *got.Spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
			t.Errorf("spec = %+v", got.Spec)
		}

		// A PUT of the original manifest keeps the allocated IP and node port.
		svc.ResourceVersion = got.ResourceVersion
		again, err := c.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update without allocated fields: %v", err)
		}
		if again.Spec.ClusterIP != got.Spec.ClusterIP || again.Spec.Ports[0].NodePort != p.NodePort {
			t.Errorf("update changed allocations: %s/%d -> %s/%d", got.Spec.ClusterIP, p.NodePort, again.Spec.ClusterIP, again.Spec.Ports[0].NodePort)
		}

		bad := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, NodePort: 80}}}}
		_, err = c.CoreV1().Services("default").Create(ctx, bad, metav1.CreateOptions{})
		wantInvalid(t, err, "spec.ports[0].nodePort", metav1.CauseTypeFieldValueInvalid, "The range of valid ports is 30000-32767")
	})

	t.Run("namespace gets finalizer, phase and name label", func(t *testing.T) {
		ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{"kubernetes"}) || ns.Status.Phase != corev1.NamespaceActive ||
			ns.Labels["kubernetes.io/metadata.name"] != "team-a" {
			t.Errorf("namespace = %+v", ns)
		}
		_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team.b"}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("namespace with a dot: err = %v, want Invalid", err)
		}
	})

	t.Run("namespace deletion waits for the finalize subresource", func(t *testing.T) {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ns, err := c.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ns.Status.Phase != corev1.NamespaceTerminating {
			t.Errorf("phase = %q after delete, want Terminating", ns.Status.Phase)
		}
		// What the namespace controller does once the namespace is empty.
		ns.Spec.Finalizers = nil
		if _, err := c.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace after finalize: err = %v, want NotFound", err)
		}
		// finalize sets the finalizers of a live namespace too, and validates them.
		live, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		live.Spec.Finalizers = []corev1.FinalizerName{"kubernetes", "example.com/cleanup"}
		if out, err := c.CoreV1().Namespaces().Finalize(ctx, live, metav1.UpdateOptions{}); err != nil ||
			!slices.Equal(out.Spec.Finalizers, live.Spec.Finalizers) || out.Status.Phase != corev1.NamespaceActive {
			t.Errorf("finalize of a live namespace: %v, %+v", err, out)
		}
		live.Spec.Finalizers = []corev1.FinalizerName{"cleanup"}
		live.ResourceVersion = ""
		_, err = c.CoreV1().Namespaces().Finalize(ctx, live, metav1.UpdateOptions{})
		wantInvalid(t, err, "spec.finalizers[0]", metav1.CauseTypeFieldValueInvalid, "name is neither a standard finalizer name nor is it fully qualified")
	})

	t.Run("secrets merge stringData and check their type", func(t *testing.T) {
		s, err := c.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
			StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Type != corev1.SecretTypeOpaque || string(s.Data["password"]) != "hunter2" || len(s.StringData) != 0 {
			t.Errorf("secret = type %q data %q stringData %v", s.Type, s.Data, s.StringData)
		}
		_, err = c.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("x")}}, metav1.CreateOptions{})
		wantInvalid(t, err, "data[tls.key]", metav1.CauseTypeFieldValueRequired, "Required value")
	})

	t.Run("immutable configmap", func(t *testing.T) {
		cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "frozen"},
			Data: map[string]string{"k": "v"}, Immutable: ptrTo(true)}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["k"] = "w"
		_, err = c.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
		wantInvalid(t, err, "data", metav1.CauseTypeForbidden, "field is immutable when `immutable` is set")
	})

	t.Run("replication controller defaults and scale", func(t *testing.T) {
		rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Spec: corev1.ReplicationControllerSpec{
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rc"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		got, err := c.CoreV1().ReplicationControllers("default").Create(ctx, rc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *got.Spec.Replicas != 1 || got.Spec.Selector["app"] != "rc" || got.Labels["app"] != "rc" {
			t.Errorf("rc = replicas %d selector %v labels %v", *got.Spec.Replicas, got.Spec.Selector, got.Labels)
		}
		scale, err := c.CoreV1().ReplicationControllers("default").GetScale(ctx, "rc", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if scale.Spec.Replicas != 1 || scale.Status.Selector != "app=rc" {
			t.Errorf("scale = %+v", scale)
		}
		scale.Spec.Replicas = 3
		if _, err := c.CoreV1().ReplicationControllers("default").UpdateScale(ctx, "rc", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err = c.CoreV1().ReplicationControllers("default").Get(ctx, "rc", metav1.GetOptions{})
		if err != nil || *got.Spec.Replicas != 3 {
			t.Errorf("after scale: replicas %v err %v, want 3", got.Spec.Replicas, err)
		}
	})

	t.Run("event field selector", func(t *testing.T) {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1"}, Reason: "Pulled", Type: "Normal",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}}
		if _, err := c.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for selector, want := range map[string]int{"involvedObject.name=web,reason=Pulled": 1, "involvedObject.kind=Node": 0} {
			list, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: selector})
			if err != nil {
				t.Fatalf("%s: %v", selector, err)
			}
			if len(list.Items) != want {
				t.Errorf("%s matched %d events, want %d", selector, len(list.Items), want)
			}
		}
	})
}

func ptrTo[T any](v T) *T { return &v }
