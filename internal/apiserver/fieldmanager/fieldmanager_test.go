package fieldmanager_test

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	"mizzen/internal/apiserver/fieldmanager"
	"mizzen/internal/apiserver/openapi"
	"mizzen/internal/registry/catalog"
)

var (
	deploymentGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")
	configMapGVK  = corev1.SchemeGroupVersion.WithKind("ConfigMap")
)

func newManagers(t testing.TB) *fieldmanager.Managers {
	t.Helper()
	resources := catalog.All()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fieldmanager.New(slog.New(slog.DiscardHandler), scheme, resources, func() (map[string]*spec.Schema, error) { return openapi.Models(resources) })
}

func config(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// managers lists "manager/operation/subresource" of an object's entries.
func managers(obj k8sruntime.Object) []string {
	acc := obj.(metav1.Object)
	var out []string
	for _, e := range acc.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
	}
	return out
}

func fieldsOf(t *testing.T, obj k8sruntime.Object, manager string) string {
	t.Helper()
	for _, e := range obj.(metav1.Object).GetManagedFields() {
		if e.Manager == manager {
			return string(e.FieldsV1.Raw)
		}
	}
	t.Fatalf("no entry of %q in %v", manager, managers(obj))
	return ""
}

const cmConfig = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default, labels: {team: a}}
data: {color: blue, size: large}
`

func TestApplyThenUpdateThenConflict(t *testing.T) {
	m := newManagers(t)
	created, err := m.Apply(configMapGVK, "", &corev1.ConfigMap{}, config(t, cmConfig), "tool-a", false)
	if err != nil {
		t.Fatal(err)
	}
	cm := created.(*corev1.ConfigMap)
	if cm.Data["color"] != "blue" || cm.Labels["team"] != "a" {
		t.Fatalf("applied object = %+v", cm)
	}
	if got := managers(cm); len(got) != 1 || got[0] != "tool-a/Apply/" {
		t.Fatalf("managers = %v", got)
	}
	if f := fieldsOf(t, cm, "tool-a"); !strings.Contains(f, `"f:color"`) || !strings.Contains(f, `"f:team"`) {
		t.Errorf("tool-a's fields = %s", f)
	}

	// Another client updates one of tool-a's fields: it now shares nothing, owns it.
	edited := cm.DeepCopy()
	edited.Data["color"] = "red"
	updated := m.Update(configMapGVK, "", cm, edited, "editor").(*corev1.ConfigMap)
	if got := managers(updated); len(got) != 2 {
		t.Fatalf("managers after update = %v", got)
	}
	if f := fieldsOf(t, updated, "editor"); !strings.Contains(f, `"f:color"`) || strings.Contains(f, `"f:size"`) {
		t.Errorf("editor's fields = %s", f)
	}

	// tool-a applying its old value again conflicts with the editor.
	_, err = m.Apply(configMapGVK, "", updated, config(t, cmConfig), "tool-a", false)
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply over another manager's field: %v, want a conflict", err)
	}
	want := `Apply failed with 1 conflict: conflict with "editor" using v1`
	if !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), ".data.color") {
		t.Errorf("conflict message %q, want %q ... .data.color", err.Error(), want)
	}
	forced, err := m.Apply(configMapGVK, "", updated, config(t, cmConfig), "tool-a", true)
	if err != nil {
		t.Fatal(err)
	}
	if c := forced.(*corev1.ConfigMap); c.Data["color"] != "blue" {
		t.Errorf("forced apply left color %q", c.Data["color"])
	}
	if got := managers(forced); len(got) != 1 {
		t.Errorf("after a forced apply the editor still owns something: %v", got)
	}
}

func TestApplyRemovesWhatTheManagerNoLongerSets(t *testing.T) {
	m := newManagers(t)
	first, err := m.Apply(configMapGVK, "", &corev1.ConfigMap{}, config(t, cmConfig), "tool-a", false)
	if err != nil {
		t.Fatal(err)
	}
	second, err := m.Apply(configMapGVK, "", first, config(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {color: blue}
`), "tool-a", false)
	if err != nil {
		t.Fatal(err)
	}
	cm := second.(*corev1.ConfigMap)
	if _, ok := cm.Data["size"]; ok {
		t.Errorf("size still set: %v", cm.Data)
	}
	if _, ok := cm.Labels["team"]; ok {
		t.Errorf("label still set: %v", cm.Labels)
	}
}

func TestApplyBadConfigurations(t *testing.T) {
	m := newManagers(t)
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nspec: {replicas: 1}\n", "field not declared in schema"},
		{"other version", "apiVersion: v2\nkind: ConfigMap\nmetadata: {name: x}\n", "invalid object type"},
		{"other kind", "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n", "invalid object type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Apply(configMapGVK, "", &corev1.ConfigMap{}, config(t, tc.doc), "tool-a", false)
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a bad request saying %q", err, tc.want)
			}
		})
	}
}

// A write to the object never takes ownership of its status, nor one to the status
// of its spec.
func TestStatusIsItsOwnManager(t *testing.T) {
	m := newManagers(t)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
	applied, err := m.Apply(deploymentGVK, "", &appsv1.Deployment{}, config(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec: {replicas: 2}
status: {replicas: 7}
`), "tool-a", false)
	if err != nil {
		t.Fatal(err)
	}
	if f := fieldsOf(t, applied, "tool-a"); strings.Contains(f, "f:status") || !strings.Contains(f, "f:replicas") {
		t.Errorf("tool-a's fields = %s", f)
	}
	d = applied.(*appsv1.Deployment)
	withStatus := d.DeepCopy()
	withStatus.Status.ReadyReplicas = 2
	updated := m.Update(deploymentGVK, "status", d, withStatus, "controller")
	if got := managers(updated); len(got) != 2 || got[1] != "controller/Update/status" {
		t.Errorf("managers = %v", got)
	}
	if f := fieldsOf(t, updated, "controller"); !strings.Contains(f, "f:readyReplicas") || strings.Contains(f, "f:spec") {
		t.Errorf("controller's fields = %s", f)
	}
}

// Managers who wrote through another version of the same stored objects keep their
// fields, converted, when the object changes through this one.
func TestManagersOfAnotherVersionAreCompared(t *testing.T) {
	m := newManagers(t)
	eventGVK := corev1.SchemeGroupVersion.WithKind("Event")
	newEventsGVK := eventsv1.SchemeGroupVersion.WithKind("Event")
	applied, err := m.Apply(newEventsGVK, "", &eventsv1.Event{}, config(t, `
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: e1, namespace: default}
note: hello
`), "recorder", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(applied); len(got) != 1 {
		t.Fatalf("managers = %v", got)
	}
	// The same object read through core/v1, applied by another manager changing the
	// message (the core name of note): a conflict with the recorder.
	ev := &corev1.Event{ObjectMeta: applied.(*eventsv1.Event).ObjectMeta, Message: "hello"}
	ev.ManagedFields = applied.(*eventsv1.Event).ManagedFields
	_, err = m.Apply(eventGVK, "", ev, config(t, `
apiVersion: v1
kind: Event
metadata: {name: e1, namespace: default}
involvedObject: {}
message: changed
`), "other", false)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `"recorder"`) {
		t.Errorf("error %v, want a conflict with the recorder", err)
	}
}

func TestUpdateCapsManagersAndResets(t *testing.T) {
	m := newManagers(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}}
	var obj k8sruntime.Object = cm
	for i := 0; i < 12; i++ {
		next := obj.DeepCopyObject().(*corev1.ConfigMap)
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		next.Data[string(rune('a'+i))] = "x"
		obj = m.Update(configMapGVK, "", obj, next, "writer-"+string(rune('a'+i)))
	}
	got := managers(obj)
	if len(got) != 10 {
		t.Fatalf("%d managers, want 10 (the oldest merged): %v", len(got), got)
	}
	if !strings.HasPrefix(got[0], "ancient-changes/") {
		t.Errorf("oldest entry %q, want ancient-changes", got[0])
	}

	// An empty list sent by a client resets the tracking to this write's manager alone.
	reset := obj.DeepCopyObject().(*corev1.ConfigMap)
	reset.ManagedFields = []metav1.ManagedFieldsEntry{}
	reset.Data["z"] = "x"
	if got := managers(m.Update(configMapGVK, "", obj, reset, "resetter")); len(got) != 1 || got[0] != "resetter/Update/" {
		t.Errorf("after a reset: %v", got)
	}

	// Managed fields that do not decode are dropped for the live object's.
	first := cm.DeepCopy()
	first.Data = map[string]string{"a": "x"}
	live := m.Update(configMapGVK, "", &corev1.ConfigMap{}, first, "creator")
	bad := live.DeepCopyObject().(*corev1.ConfigMap)
	bad.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x", Operation: "Nonsense", FieldsType: "FieldsV9"}}
	bad.Data = map[string]string{"y": "x"}
	got = managers(m.Update(configMapGVK, "", live, bad, "fixer"))
	if strings.Join(got, ",") != "creator/Update/,fixer/Update/" {
		t.Errorf("after invalid managedFields: %v, want the live entry and fixer's", got)
	}
}

func TestManagerName(t *testing.T) {
	for _, tc := range []struct{ fieldManager, userAgent, want string }{
		{"tool", "kubectl/v1.30 (linux/amd64)", "tool"},
		{"", "kubectl/v1.30 (linux/amd64) kubernetes/abc", "kubectl"},
		{"", "kube-controller-manager/v1.30.0 (linux/amd64)/replicaset-controller", "kube-controller-manager"},
		{"", "odd\x01agent", "oddagent"},
		{"", strings.Repeat("a", 200), strings.Repeat("a", 128)},
		{"", "", ""},
	} {
		if got := fieldmanager.ManagerName(tc.fieldManager, tc.userAgent); got != tc.want {
			t.Errorf("ManagerName(%q, %q) = %q, want %q", tc.fieldManager, tc.userAgent, got, tc.want)
		}
	}
}

// TestTypeConverterCost reports what building the shared type converter costs; the
// figures go to the report, nothing is asserted on them.
func TestTypeConverterCost(t *testing.T) {
	resources := catalog.All()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := newManagers(t)
	start := time.Now()
	tc, err := m.TypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// The library resolves types lazily: touch every kind, as a server's writes would.
	for _, r := range resources {
		obj := r.New()
		obj.GetObjectKind().SetGroupVersionKind(r.GroupVersionKind())
		if _, err := tc.ObjectToTyped(obj); err != nil {
			t.Errorf("%s: %v", r.GroupVersionKind(), err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("type converter: built in %v, %.1f MiB retained (%.1f MiB allocated while building)",
		took, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
	runtime.KeepAlive(tc)
	runtime.KeepAlive(m)
	runtime.KeepAlive(resources)
}

// List keys the server defaults (a port's protocol) match a configuration that
// leaves them out, so re-applying changes nothing and keeps one port.
func TestApplyListKeysWithDefaults(t *testing.T) {
	m := newManagers(t)
	svcGVK := corev1.SchemeGroupVersion.WithKind("Service")
	doc := `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports:
  - {port: 80, targetPort: 8080}
`
	first, err := m.Apply(svcGVK, "", &corev1.Service{}, config(t, doc), "tool", false)
	if err != nil {
		t.Fatal(err)
	}
	svc := first.(*corev1.Service)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Fatalf("ports after apply = %+v", svc.Spec.Ports)
	}
	second, err := m.Apply(svcGVK, "", svc, config(t, strings.Replace(doc, "targetPort: 8080", "targetPort: 9090", 1)), "tool", false)
	if err != nil {
		t.Fatal(err)
	}
	if ports := second.(*corev1.Service).Spec.Ports; len(ports) != 1 || ports[0].TargetPort.IntValue() != 9090 {
		t.Errorf("ports after re-apply = %+v", ports)
	}
}
