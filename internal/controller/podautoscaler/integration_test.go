package podautoscaler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/controller/podautoscaler"
	"mizzen/internal/testing/apiserver"
)

// The test is in an external package: the test apiserver's bundle imports the
// controller-manager, which imports this package.

// TestAgainstAPIServer runs the controller's real clients (discovery RESTMapper,
// scale client, metrics clients) against a real apiserver with no metrics APIs
// registered: the HPA raises a Deployment, a StatefulSet, a ReplicaSet, a
// ReplicationController and a custom resource defined after the controller started to
// minReplicas through their scale subresources, and a Pods metric with no custom metrics API gives ScalingActive=False
// with upstream's reason and message.
func TestAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	cfg := apiserver.Start(t)
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "agnhost"}}}},
	}}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr(int32(3)), MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "requests-per-second"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(resource.MustParse("10"))}}}},
		}}
	if _, err := client.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	f := informers.NewSharedInformerFactory(client, 0)
	// The controller-manager's clients ask for protobuf (its --kube-api-content-type);
	// the scale and metrics clients are made from that config too.
	hpaCfg := rest.CopyConfig(cfg)
	hpaCfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := podautoscaler.NewForConfig(ctx, hpaCfg, client, f, podautoscaler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(10)
	c.SetRecorder(recorder)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())

	sync := func() *autoscalingv2.HorizontalPodAutoscaler {
		t.Helper()
		_ = c.Sync(ctx, "default/web")
		got, err := client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// What the informer would deliver before the next sync.
		if err := f.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Update(got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	got := sync()
	scale, err := client.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 3 || got.Status.DesiredReplicas != 3 || got.Status.LastScaleTime == nil {
		t.Fatalf("below minReplicas: scale %d, status %+v", scale.Spec.Replicas, got.Status)
	}
	if e := <-recorder.Events; e != "Normal SuccessfulRescale New size: 3; reason: Current number of replicas below Spec.MinReplicas" {
		t.Errorf("event %q", e)
	}

	// Within range now, so the metric is read, and there is no API to read it from.
	got = sync()
	var active *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == autoscalingv2.ScalingActive {
			active = &got.Status.Conditions[i]
		}
	}
	wantMsg := "the HPA was unable to compute the replica count: unable to get metric requests-per-second: unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered"
	if active == nil || active.Status != corev1.ConditionFalse || active.Reason != "FailedGetPodsMetric" || active.Message != wantMsg {
		t.Errorf("ScalingActive %+v\nwant False FailedGetPodsMetric %q", active, wantMsg)
	}
	if e := <-recorder.Events; !strings.HasPrefix(e, "Warning FailedGetPodsMetric unable to get metric requests-per-second") {
		t.Errorf("event %q", e)
	}

	// The other built-in kinds with a scale subresource, and a custom resource with one.
	dyn := dynamic.NewForConfigOrDie(cfg)
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	tmpl := d.Spec.Template
	objects := []struct {
		apiVersion, kind, name string
		create                 func() error
		replicas               func() (int32, error)
	}{
		{"apps/v1", "StatefulSet", "db", func() error {
			_, err := client.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(1)), Selector: d.Spec.Selector, Template: tmpl}}, metav1.CreateOptions{})
			return err
		}, func() (int32, error) {
			s, err := client.AppsV1().StatefulSets("default").GetScale(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return s.Spec.Replicas, nil
		}},
		{"apps/v1", "ReplicaSet", "rs", func() error {
			_, err := client.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs"},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(1)), Selector: d.Spec.Selector, Template: tmpl}}, metav1.CreateOptions{})
			return err
		}, func() (int32, error) {
			s, err := client.AppsV1().ReplicaSets("default").GetScale(ctx, "rs", metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return s.Spec.Replicas, nil
		}},
		{"example.com/v1", "Widget", "widget", func() error {
			return createScalableCustomResource(ctx, t, dyn, widgets, "widget")
		}, func() (int32, error) {
			s, err := dyn.Resource(widgets).Namespace("default").Get(ctx, "widget", metav1.GetOptions{}, "scale")
			if err != nil {
				return 0, err
			}
			n, _, err := unstructured.NestedInt64(s.Object, "spec", "replicas")
			return int32(n), err
		}},
		{"v1", "ReplicationController", "rc", func() error {
			_, err := client.CoreV1().ReplicationControllers("default").Create(ctx, &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc"},
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr(int32(1)), Selector: labels, Template: &tmpl}}, metav1.CreateOptions{})
			return err
		}, func() (int32, error) {
			s, err := client.CoreV1().ReplicationControllers("default").GetScale(ctx, "rc", metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return s.Spec.Replicas, nil
		}},
	}
	for len(recorder.Events) > 0 {
		<-recorder.Events
	}
	for _, o := range objects {
		if err := o.create(); err != nil {
			t.Fatalf("%s: %v", o.kind, err)
		}
		h := hpa.DeepCopy()
		h.Name = o.name
		h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: o.apiVersion, Kind: o.kind, Name: o.name}
		h.Spec.MinReplicas = ptr(int32(2))
		created, err := client.AutoscalingV2().HorizontalPodAutoscalers("default").Create(ctx, h, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Add(created); err != nil {
			t.Fatal(err)
		}
		_ = c.Sync(ctx, "default/"+o.name)
		if n, err := o.replicas(); err != nil || n != 2 {
			t.Errorf("%s: scale %d (%v), want 2", o.kind, n, err)
		}
		select {
		case e := <-recorder.Events:
			if !strings.HasPrefix(e, "Normal SuccessfulRescale New size: 2") {
				t.Errorf("%s: event %q", o.kind, e)
			}
		default:
			t.Errorf("%s: no event", o.kind)
		}
	}

	// An External metric with no external metrics API.
	got.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr(resource.MustParse("30"))}}}}
	if got, err = client.AutoscalingV2().HorizontalPodAutoscalers("default").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Update(got); err != nil {
		t.Fatal(err)
	}
	got = sync()
	for _, cond := range got.Status.Conditions {
		if cond.Type == autoscalingv2.ScalingActive {
			if cond.Reason != "FailedGetExternalMetric" || !strings.Contains(cond.Message, "unable to fetch metrics from external metrics API: the server could not find the requested resource") {
				t.Errorf("ScalingActive %+v", cond)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// createScalableCustomResource defines the custom resource gvr (kind Widget) with a
// scale subresource at .spec.replicas, waits until it is served, and creates name in
// default with one replica.
func createScalableCustomResource(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) error {
	t.Helper()
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": gvr.Resource + "." + gvr.Group},
		"spec": map[string]any{
			"group": gvr.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": gvr.Resource, "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": gvr.Version, "served": true, "storage": true,
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				"subresources": map[string]any{"scale": map[string]any{"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
			}},
		},
	}}
	if _, err := dyn.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"replicas": int64(1)},
	}}
	// Served once the apiserver has read the definition: a bounded wait.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{})
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
