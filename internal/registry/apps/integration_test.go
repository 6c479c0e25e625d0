package apps_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// These tests run the apps/v1 resources in a real apiserver on embedded etcd and look
// at them as client-go does.

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	}
}

func selector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

// causes returns the field of each cause of an Invalid error, failing on other errors.
func causes(t *testing.T, err error) []string {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error = %v, want Invalid (422)", err)
	}
	var fields []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	return fields
}

// table gets a resource as kubectl get does, as a Table.
func table(t *testing.T, c *kubernetes.Clientset, resource, name string) metav1.Table {
	t.Helper()
	raw, err := c.AppsV1().RESTClient().Get().Namespace("default").Resource(resource).Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(context.Background()).Raw()
	if err != nil {
		t.Fatalf("table of %s/%s: %v", resource, name, err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func TestAppsAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()

	t.Run("discovery", func(t *testing.T) {
		list, err := c.Discovery().ServerResourcesForGroupVersion("apps/v1")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]struct {
			kind, singular string
			short          []string
			all            bool
		}{
			"deployments":         {"Deployment", "deployment", []string{"deploy"}, true},
			"replicasets":         {"ReplicaSet", "replicaset", []string{"rs"}, true},
			"daemonsets":          {"DaemonSet", "daemonset", []string{"ds"}, true},
			"statefulsets":        {"StatefulSet", "statefulset", []string{"sts"}, true},
			"controllerrevisions": {"ControllerRevision", "controllerrevision", nil, false},
		}
		seen := map[string]bool{}
		for _, r := range list.APIResources {
			w, ok := want[r.Name]
			if !ok {
				continue
			}
			seen[r.Name] = true
			if r.Kind != w.kind || r.SingularName != w.singular || !r.Namespaced || len(r.ShortNames) != len(w.short) ||
				(len(w.short) > 0 && !reflect.DeepEqual(r.ShortNames, w.short)) || reflect.DeepEqual(r.Categories, []string{"all"}) != w.all {
				t.Errorf("discovery of %s = %+v", r.Name, r)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("discovery lists %v of %d resources", seen, len(want))
		}
	})

	t.Run("deployment defaults, table and scale", func(t *testing.T) {
		d, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       appsv1.DeploymentSpec{Selector: selector(), Template: podTemplate()},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pct := intstr.FromString("25%")
		if *d.Spec.Replicas != 1 || *d.Spec.RevisionHistoryLimit != 10 || *d.Spec.ProgressDeadlineSeconds != 600 ||
			!reflect.DeepEqual(d.Spec.Strategy.RollingUpdate, &appsv1.RollingUpdateDeployment{MaxUnavailable: &pct, MaxSurge: &pct}) ||
			d.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || d.Generation != 1 {
			t.Errorf("created deployment = %+v", d)
		}

		tbl := table(t, c, "deployments", "web")
		var names []string
		for _, col := range tbl.ColumnDefinitions {
			names = append(names, col.Name)
		}
		if !reflect.DeepEqual(names, []string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"}) {
			t.Errorf("columns = %v", names)
		}
		if len(tbl.Rows) != 1 {
			t.Fatalf("rows = %v", tbl.Rows)
		}
		cells := tbl.Rows[0].Cells
		if cells[0] != "web" || cells[1] != "0/1" || cells[5] != "nginx" || cells[6] != "nginx:1.27" || cells[7] != "app=web" {
			t.Errorf("cells = %v", cells)
		}

		scale, err := c.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if scale.Spec.Replicas != 1 || scale.Status.Selector != "app=web" {
			t.Errorf("scale = %+v", scale)
		}
		scale.Spec.Replicas = 4
		if _, err := c.AppsV1().Deployments("default").UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if d, err := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 4 {
			t.Errorf("after scale: %v, %v", d.Spec.Replicas, err)
		}
	})

	t.Run("deployment status", func(t *testing.T) {
		d, err := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 5}
		_, err = c.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{})
		if got := causes(t, err); !reflect.DeepEqual(got, []string{"status.readyReplicas"}) {
			t.Errorf("causes = %v (%v)", got, err)
		}
		d.Status.ReadyReplicas = 3
		if d, err = c.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if tbl := table(t, c, "deployments", "web"); tbl.Rows[0].Cells[1] != "3/4" {
			t.Errorf("READY = %v, want 3/4", tbl.Rows[0].Cells[1])
		}
	})

	t.Run("deployment invalid", func(t *testing.T) {
		tmpl := podTemplate()
		tmpl.Labels = map[string]string{"app": "db"}
		_, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "mismatch"},
			Spec:       appsv1.DeploymentSpec{Selector: selector(), Template: tmpl},
		}, metav1.CreateOptions{})
		if got := causes(t, err); !reflect.DeepEqual(got, []string{"spec.template.metadata.labels"}) {
			t.Errorf("causes = %v (%v)", got, err)
		}
	})

	t.Run("a scale patch with an unknown field is applied (a warning, not a failure)", func(t *testing.T) {
		s := &autoscalingv1.Scale{}
		err := c.AppsV1().RESTClient().Patch(types.StrategicMergePatchType).Namespace("default").Resource("deployments").Name("web").
			SubResource("scale").Body([]byte(`{"spec":{"replicas":3,"bogus":1}}`)).Do(ctx).Into(s)
		if err != nil {
			t.Fatalf("scale patch: %v", err)
		}
		if s.Spec.Replicas != 3 {
			t.Errorf("scale = %d, want 3", s.Spec.Replicas)
		}
	})

	t.Run("deployment selector is immutable", func(t *testing.T) {
		d, err := c.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Selector.MatchLabels["tier"] = "front"
		d.Spec.Template.Labels["tier"] = "front"
		_, err = c.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{})
		if got := causes(t, err); !reflect.DeepEqual(got, []string{"spec.selector"}) {
			t.Errorf("causes = %v (%v)", got, err)
		}
	})

	t.Run("replicaset field selector", func(t *testing.T) {
		_, err := c.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
			Spec:       appsv1.ReplicaSetSpec{Selector: selector(), Template: podTemplate()},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for sel, want := range map[string]int{"status.replicas=0": 1, "status.replicas=1": 0} {
			list, err := c.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				t.Fatalf("%s: %v", sel, err)
			}
			if len(list.Items) != want {
				t.Errorf("%s matched %d replicasets, want %d", sel, len(list.Items), want)
			}
		}
	})

	t.Run("statefulset", func(t *testing.T) {
		ss, err := c.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{ServiceName: "db", Selector: selector(), Template: podTemplate(),
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ss.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || *ss.Spec.UpdateStrategy.RollingUpdate.Partition != 0 ||
			ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
			*ss.Spec.VolumeClaimTemplates[0].Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
			t.Errorf("created statefulset = %+v", ss.Spec)
		}
		ss.Spec.ServiceName = "other"
		_, err = c.AppsV1().StatefulSets("default").Update(ctx, ss, metav1.UpdateOptions{})
		if got := causes(t, err); !reflect.DeepEqual(got, []string{"spec"}) {
			t.Errorf("causes = %v (%v)", got, err)
		}
		if tbl := table(t, c, "statefulsets", "db"); len(tbl.Rows) != 1 || tbl.Rows[0].Cells[1] != "0/1" {
			t.Errorf("table = %+v", tbl.Rows)
		}
		scale, err := c.AppsV1().StatefulSets("default").GetScale(ctx, "db", metav1.GetOptions{})
		if err != nil || scale.Status.Selector != "app=web" {
			t.Errorf("scale = %+v, %v", scale, err)
		}
	})

	t.Run("daemonset", func(t *testing.T) {
		ds, err := c.AppsV1().DaemonSets("default").Create(ctx, &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "agent"},
			Spec:       appsv1.DaemonSetSpec{Selector: selector(), Template: podTemplate()},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
		if !reflect.DeepEqual(ds.Spec.UpdateStrategy.RollingUpdate, &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}) {
			t.Errorf("updateStrategy = %+v", ds.Spec.UpdateStrategy)
		}
		if got := ds.Annotations["deprecated.daemonset.template.generation"]; got != "1" {
			t.Errorf("template generation = %q, want 1", got)
		}
		ds.Spec.Template.Spec.Containers[0].Image = "nginx:2"
		if ds, err = c.AppsV1().DaemonSets("default").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := ds.Annotations["deprecated.daemonset.template.generation"]; got != "2" || ds.Generation != 2 {
			t.Errorf("after a template change: template generation %q, generation %d", got, ds.Generation)
		}
		if tbl := table(t, c, "daemonsets", "agent"); len(tbl.Rows) != 1 || tbl.Rows[0].Cells[6] != "<none>" {
			t.Errorf("table = %+v", tbl.Rows)
		}
	})

	t.Run("replicaset status write checks the status and ignores the spec", func(t *testing.T) {
		rs, err := c.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "statusrs"},
			Spec:       appsv1.ReplicaSetSpec{Selector: selector(), Template: podTemplate()},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs.Status.Replicas = -1
		_, err = c.AppsV1().ReplicaSets("default").UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		want := []string{"status.replicas", "status.fullyLabeledReplicas", "status.readyReplicas", "status.availableReplicas"}
		if got := causes(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("causes = %v (%v)", got, err)
		}
		rs.Status.Replicas = 2
		nine := int32(9)
		rs.Spec.Replicas = &nine
		rs.Spec.Template.Spec.Containers[0].Image = "" // invalid, but not looked at
		if rs, err = c.AppsV1().ReplicaSets("default").UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if *rs.Spec.Replicas != 1 || rs.Spec.Template.Spec.Containers[0].Image == "" || rs.Status.Replicas != 2 {
			t.Errorf("after a status write: spec.replicas %d image %q status.replicas %d; want 1, the stored image, 2", *rs.Spec.Replicas, rs.Spec.Template.Spec.Containers[0].Image, rs.Status.Replicas)
		}
	})

	t.Run("status writes keep the generation", func(t *testing.T) {
		d, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "generations"},
			Spec:       appsv1.DeploymentSpec{Selector: selector(), Template: podTemplate()},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A status patch that also carries a spec change: only the status is written.
		patch := []byte(`{"spec":{"replicas":7},"status":{"observedGeneration":1,"replicas":3}}`)
		d, err = c.AppsV1().Deployments("default").Patch(ctx, d.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			t.Fatal(err)
		}
		if d.Generation != 1 || *d.Spec.Replicas != 1 || d.Status.Replicas != 3 {
			t.Errorf("after a status patch: generation %d, spec.replicas %d, status.replicas %d; want 1, 1, 3", d.Generation, *d.Spec.Replicas, d.Status.Replicas)
		}
		d.Status.Replicas = 2
		if d, err = c.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if d.Generation != 1 || d.Status.Replicas != 2 {
			t.Errorf("after a status update: generation %d, status.replicas %d; want 1, 2", d.Generation, d.Status.Replicas)
		}
		// A spec change through the object itself does bump it.
		d, err = c.AppsV1().Deployments("default").Patch(ctx, d.Name, types.StrategicMergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Generation != 2 || *d.Spec.Replicas != 4 || d.Status.Replicas != 2 {
			t.Errorf("after a spec patch: generation %d, spec.replicas %d, status.replicas %d; want 2, 4, 2", d.Generation, *d.Spec.Replicas, d.Status.Replicas)
		}
	})
}
