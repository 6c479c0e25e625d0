// Package apply tests server-side apply and managedFields against a real mizzen
// apiserver on embedded etcd, through client-go and the upstream kubectl, as a user
// sees them.
package apply

import (
	"context"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"mizzen/internal/testing/apiserver"
)

var ctx = context.Background()

// clientAs returns a clientset whose user agent (and so default manager) is agent.
func clientAs(cfg *rest.Config, agent string) *kubernetes.Clientset {
	c := rest.CopyConfig(cfg)
	c.UserAgent = agent
	return kubernetes.NewForConfigOrDie(c)
}

// entries lists "manager/operation/subresource" of an object's managedFields.
func entries(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
	}
	return out
}

func entryOf(t *testing.T, obj metav1.Object, manager string, op metav1.ManagedFieldsOperationType) metav1.ManagedFieldsEntry {
	t.Helper()
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Operation == op {
			return e
		}
	}
	t.Fatalf("no %s entry of %q in %v", op, manager, entries(obj))
	return metav1.ManagedFieldsEntry{}
}

func configMap(name string, data map[string]string) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(name, "default").WithData(data)
}

func TestApplyCreatesUpdatesAndConflicts(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	cms := c.CoreV1().ConfigMaps("default")

	// Apply creates, and the applier owns what it sent.
	created, err := cms.Apply(ctx, configMap("settings", map[string]string{"color": "blue", "size": "large"}).
		WithLabels(map[string]string{"team": "a"}), metav1.ApplyOptions{FieldManager: "tool-a"})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.Data["size"] != "large" {
		t.Fatalf("created %+v", created)
	}
	e := entryOf(t, created, "tool-a", metav1.ManagedFieldsOperationApply)
	if e.APIVersion != "v1" || e.FieldsType != "FieldsV1" || e.Time == nil || !strings.Contains(string(e.FieldsV1.Raw), `"f:size"`) {
		t.Errorf("tool-a's entry = %+v (%s)", e, e.FieldsV1.Raw)
	}

	// Re-applied without size and the label: tool-a's own fields go.
	again, err := cms.Apply(ctx, configMap("settings", map[string]string{"color": "blue"}), metav1.ApplyOptions{FieldManager: "tool-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Data["size"]; ok || again.Labels["team"] != "" {
		t.Errorf("after re-apply: data %v labels %v", again.Data, again.Labels)
	}

	// Another manager changing tool-a's field conflicts, with upstream's message.
	_, err = cms.Apply(ctx, configMap("settings", map[string]string{"color": "red"}), metav1.ApplyOptions{FieldManager: "tool-b"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("second manager: %v, want 409", err)
	}
	if want := `Apply failed with 1 conflict: conflict with "tool-a": .data.color`; err.Error() != want {
		t.Errorf("conflict message %q, want %q", err.Error(), want)
	}
	status := err.(apierrors.APIStatus).Status()
	if status.Reason != metav1.StatusReasonConflict || len(status.Details.Causes) != 1 ||
		status.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict || status.Details.Causes[0].Field != ".data.color" {
		t.Errorf("conflict status = %+v", status)
	}
	forced, err := cms.Apply(ctx, configMap("settings", map[string]string{"color": "red"}), metav1.ApplyOptions{FieldManager: "tool-b", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if forced.Data["color"] != "red" || strings.Contains(strings.Join(entries(forced), ","), "tool-a") {
		t.Errorf("forced apply: data %v, managers %v", forced.Data, entries(forced))
	}

	// A plain update by another client is recorded under its user agent.
	editor := clientAs(cfg, "editor/v9 (linux)")
	forced.Data["extra"] = "1"
	updated, err := editor.CoreV1().ConfigMaps("default").Update(ctx, forced, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(entries(updated), ","); got != "tool-b/Apply/,editor/Update/" {
		t.Errorf("managers = %s", got)
	}
	if f := string(entryOf(t, updated, "editor", metav1.ManagedFieldsOperationUpdate).FieldsV1.Raw); !strings.Contains(f, `"f:extra"`) || strings.Contains(f, `"f:color"`) {
		t.Errorf("editor's fields %s", f)
	}
	// Create and patch are recorded too, fieldManager first.
	made, err := editor.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "made"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched, err := c.CoreV1().ConfigMaps("default").Patch(ctx, "made", types.MergePatchType, []byte(`{"data":{"c":"d"}}`), metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(entries(made), ","); got != "editor/Update/" {
		t.Errorf("after create: %s", got)
	}
	if got := strings.Join(entries(patched), ","); got != "editor/Update/,patcher/Update/" {
		t.Errorf("after patch: %s", got)
	}

	// A client sending a list of one empty entry strips managedFields entirely, as
	// upstream documents; tracking starts again with the next apply.
	reset, err := c.CoreV1().ConfigMaps("default").Patch(ctx, "made", types.MergePatchType,
		[]byte(`{"metadata":{"managedFields":[{}]},"data":{"e":"f"}}`), metav1.PatchOptions{FieldManager: "resetter"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(entries(reset), ","); got != "" || reset.Data["e"] != "f" {
		t.Errorf("after a reset: managers %q, data %v", got, reset.Data)
	}
}

func TestApplyDryRunWritesNothing(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	cms := c.CoreV1().ConfigMaps("default")
	got, err := cms.Apply(ctx, configMap("dry", map[string]string{"a": "b"}), metav1.ApplyOptions{FieldManager: "tool", DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["a"] != "b" || len(got.ManagedFields) != 1 {
		t.Errorf("dry-run answer %+v", got)
	}
	if _, err := cms.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("dry-run apply created the object: %v", err)
	}
}

func TestApplyStatus(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	deployments := c.AppsV1().Deployments("default")
	labels := map[string]string{"app": "web"}
	spec := appsv1ac.DeploymentSpec().WithReplicas(2).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("web").WithImage("web:1"))))
	d, err := deployments.Apply(ctx, appsv1ac.Deployment("web", "default").WithSpec(spec).
		WithStatus(appsv1ac.DeploymentStatus().WithReplicas(9)), metav1.ApplyOptions{FieldManager: "deployer"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.Replicas != 0 {
		t.Errorf("apply to the object set status.replicas = %d", d.Status.Replicas)
	}
	if f := string(entryOf(t, d, "deployer", metav1.ManagedFieldsOperationApply).FieldsV1.Raw); strings.Contains(f, "f:status") {
		t.Errorf("the object's applier owns status: %s", f)
	}

	st, err := deployments.ApplyStatus(ctx, appsv1ac.Deployment("web", "default").
		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(5)).
		WithStatus(appsv1ac.DeploymentStatus().WithReplicas(2).WithReadyReplicas(1)), metav1.ApplyOptions{FieldManager: "controller"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.ReadyReplicas != 1 || *st.Spec.Replicas != 2 {
		t.Errorf("after status apply: status %+v, spec.replicas %d", st.Status, *st.Spec.Replicas)
	}
	e := entryOf(t, st, "controller", metav1.ManagedFieldsOperationApply)
	if e.Subresource != "status" || !strings.Contains(string(e.FieldsV1.Raw), "f:readyReplicas") || strings.Contains(string(e.FieldsV1.Raw), "f:spec") {
		t.Errorf("controller's entry %+v %s", e, e.FieldsV1.Raw)
	}

	// The status applier does not conflict with the spec's, and vice versa.
	if _, err := deployments.Apply(ctx, appsv1ac.Deployment("web", "default").WithSpec(spec.WithReplicas(3)), metav1.ApplyOptions{FieldManager: "deployer"}); err != nil {
		t.Errorf("re-applying the spec: %v", err)
	}
	// A status update by another manager changing the controller's field conflicts
	// only for appliers: an update just takes it over.
	cur, err := deployments.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.ReadyReplicas = 2
	up, err := deployments.UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if e := entryOf(t, up, "other", metav1.ManagedFieldsOperationUpdate); e.Subresource != "status" {
		t.Errorf("status update entry %+v", e)
	}
	_, err = deployments.ApplyStatus(ctx, appsv1ac.Deployment("web", "default").
		WithStatus(appsv1ac.DeploymentStatus().WithReplicas(2).WithReadyReplicas(1)), metav1.ApplyOptions{FieldManager: "controller"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "other" with subresource "status" using apps/v1`) {
		t.Errorf("status apply over another's field: %v", err)
	}

	// There is nothing to apply the status of when the object does not exist.
	_, err = deployments.ApplyStatus(ctx, appsv1ac.Deployment("none", "default").
		WithStatus(appsv1ac.DeploymentStatus().WithReplicas(1)), metav1.ApplyOptions{FieldManager: "controller"})
	if !apierrors.IsNotFound(err) {
		t.Errorf("status apply to a missing object: %v, want 404", err)
	}
}

// rawApply sends an apply patch as-is and returns the status code and error.
func rawApply(c *kubernetes.Clientset, contentType, query, body string) (int, error) {
	req := c.CoreV1().RESTClient().Patch(types.PatchType(contentType)).Namespace("default").Resource("configmaps").Name("raw").Body([]byte(body))
	for k, v := range splitQuery(query) {
		req = req.Param(k, v)
	}
	var code int
	err := req.Do(ctx).StatusCode(&code).Error()
	return code, err
}

func splitQuery(q string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(q, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

func TestApplyRequestErrors(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	const good = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: raw}\ndata: {a: b}\n"
	for _, tc := range []struct {
		name, contentType, query, body string
		code                           int
		message                        string
	}{
		{"no field manager", "application/apply-patch+yaml", "", good, http.StatusUnprocessableEntity,
			`PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"not YAML", "application/apply-patch+yaml", "fieldManager=t", "{a: [", http.StatusBadRequest, "error decoding YAML"},
		{"unknown field", "application/apply-patch+yaml", "fieldManager=t", good + "spec: {x: 1}\n", http.StatusBadRequest, ".spec: field not declared in schema"},
		{"no kind", "application/apply-patch+yaml", "fieldManager=t", "apiVersion: v1\nmetadata: {name: raw}\n", http.StatusBadRequest, "invalid object type"},
		{"other name", "application/apply-patch+yaml", "fieldManager=t", strings.Replace(good, "raw", "other", 1), http.StatusBadRequest,
			"the name of the object (other) does not match the name on the URL (raw)"},
		{"managedFields set", "application/apply-patch+yaml", "fieldManager=t", strings.Replace(good, "{name: raw}", "{name: raw, managedFields: [{manager: x}]}", 1), http.StatusBadRequest, "metadata.managedFields must be nil"},
		{"duplicate field, strict", "application/apply-patch+yaml", "fieldManager=t&fieldValidation=Strict", good + "data: {c: d}\n", http.StatusBadRequest, "strict decoding error"},
		{"force on a merge patch", "application/merge-patch+json", "force=true", `{"data":{"a":"b"}}`, http.StatusUnprocessableEntity,
			"force: Forbidden: may not be specified for non-apply patch"},
		{"CBOR", "application/apply-patch+cbor", "fieldManager=t", "\xa0", http.StatusUnsupportedMediaType, "the body of the request was in an unknown format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, err := rawApply(c, tc.contentType, tc.query, tc.body)
			if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("got %d %v, want %d with %q", code, err, tc.code, tc.message)
			}
			if _, ok := err.(apierrors.APIStatus); !ok {
				t.Errorf("error %T is not a Status", err)
			}
		})
	}
	if _, err := c.CoreV1().ConfigMaps("default").Get(ctx, "raw", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused apply created the object: %v", err)
	}
	code, err := rawApply(c, "application/apply-patch+yaml", "fieldManager=t", good)
	if err != nil || code != http.StatusCreated {
		t.Errorf("creating apply: %d %v, want 201", code, err)
	}
	code, err = rawApply(c, "application/apply-patch+yaml", "fieldManager=t", good)
	if err != nil || code != http.StatusOK {
		t.Errorf("updating apply: %d %v, want 200", code, err)
	}
}

// The fieldManager parameter is checked on every write, and a write to the scale
// subresource is recorded on the object under the scale subresource.
func TestFieldManagerParameter(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
		metav1.CreateOptions{FieldManager: "bad\x01name"})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "fieldManager: Invalid value") {
		t.Errorf("unprintable manager: %v", err)
	}
	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
		metav1.CreateOptions{FieldManager: strings.Repeat("m", 129)})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "fieldManager: Too long") {
		t.Errorf("long manager: %v", err)
	}
	d, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
	}, metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().Deployments("default").UpdateScale(ctx, "scaled", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", ResourceVersion: d.ResourceVersion}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}, metav1.UpdateOptions{FieldManager: "scaler"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.AppsV1().Deployments("default").Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := entryOf(t, got, "scaler", metav1.ManagedFieldsOperationUpdate)
	if e.Subresource != "scale" || string(e.FieldsV1.Raw) != `{"f:spec":{"f:replicas":{}}}` {
		t.Errorf("scale entry %+v %s", e, e.FieldsV1.Raw)
	}
}
