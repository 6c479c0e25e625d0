package fieldmanager_test

import (
	"bytes"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	"mizzen/internal/apiserver/fieldmanager"
	"mizzen/internal/registry/catalog"
	"mizzen/internal/registry/customresource"
)

var (
	podGVK     = corev1.SchemeGroupVersion.WithKind("Pod")
	serviceGVK = corev1.SchemeGroupVersion.WithKind("Service")
	widgetGVK  = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gadgetGVK  = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
)

// widgetCRD has a schema with a preserved-unknown-fields subtree, an embedded object,
// an int-or-string, a map list and a set; gadgetCRD's whole spec is preserved.
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
              port: {x-kubernetes-int-or-string: true}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true}
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
              items:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items: {type: object, required: [name], properties: {name: {type: string}, value: {type: string}}}
              plain: {type: array, items: {type: object, properties: {a: {type: string}}}}
              labels: {type: object, additionalProperties: {type: string}}
          status:
            type: object
            properties:
              ready: {type: boolean}
`

const gadgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// managersWithCRDs are field managers for the built-in kinds and the two custom ones.
func managersWithCRDs(t testing.TB) *fieldmanager.Managers {
	t.Helper()
	m := newManagers(t)
	for _, doc := range []string{widgetCRD, gadgetCRD} {
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal([]byte(doc), crd); err != nil {
			t.Fatal(err)
		}
		rs, err := customresource.Resources(crd)
		if err != nil {
			t.Fatal(err)
		}
		models := map[string]*spec.Schema{}
		for _, r := range rs {
			models[customresource.ModelName(r.GroupVersionKind())] = r.OpenAPIModel
		}
		m.SetCustom(rs, models)
	}
	return m
}

// newObject is what the apiserver's create passes as the live object: the kind's
// new empty object with its kind set.
func newObject(t testing.TB, gvk schema.GroupVersionKind) k8sruntime.Object {
	t.Helper()
	var obj k8sruntime.Object
	switch gvk {
	case widgetGVK, gadgetGVK:
		obj = &unstructured.Unstructured{Object: map[string]interface{}{}}
	default:
		for _, r := range catalog.All() {
			if r.GroupVersionKind() == gvk {
				obj = r.New()
			}
		}
	}
	if obj == nil {
		t.Fatalf("no kind %v", gvk)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

// defaulted decodes a YAML object of kind gvk and defaults it as its create would.
func defaulted(t testing.TB, gvk schema.GroupVersionKind, doc []byte) (k8sruntime.Object, bool) {
	obj := newObject(t, gvk)
	var err error
	if u, ok := obj.(*unstructured.Unstructured); ok {
		err = yaml.Unmarshal(doc, &u.Object)
		if u.Object == nil {
			return nil, false
		}
		u.SetGroupVersionKind(gvk)
	} else {
		err = yaml.Unmarshal(doc, obj)
	}
	if err != nil {
		return nil, false
	}
	for _, r := range catalog.All() {
		if r.GroupVersionKind() == gvk && r.Strategy != nil {
			r.Strategy.Default(obj)
		}
	}
	return obj, true
}

// bothPaths creates obj's managedFields through the library and through the fast
// path and fails unless they are the same, the entries' times aside. It reports
// whether the fast path answered.
func bothPaths(t *testing.T, m *fieldmanager.Managers, gvk schema.GroupVersionKind, obj k8sruntime.Object, manager string) bool {
	t.Helper()
	want := m.Update(gvk, "", newObject(t, gvk), obj.DeepCopyObject(), manager)
	got, fast := m.CreateFast(gvk, newObject(t, gvk), obj.DeepCopyObject(), manager)
	if !fast {
		got = m.Create(gvk, newObject(t, gvk), obj.DeepCopyObject(), manager)
	}
	if w, g := untimed(t, want), untimed(t, got); !bytes.Equal(w, g) {
		t.Fatalf("fast path %v differs from the library's:\nlibrary: %s\nfast:    %s", fast, w, g)
	}
	// Each of the fast path's two walks alone, where it answers.
	for name, walk := range map[string]func(schema.GroupVersionKind, k8sruntime.Object, k8sruntime.Object, string) (k8sruntime.Object, bool){
		"Go object": m.CreateGoWalk, "value": m.CreateValueWalk,
	} {
		if got, ok := walk(gvk, newObject(t, gvk), obj.DeepCopyObject(), manager); ok {
			if w, g := untimed(t, want), untimed(t, got); !bytes.Equal(w, g) {
				t.Fatalf("the %s walk differs from the library's:\nlibrary: %s\nfast:    %s", name, w, g)
			}
		}
	}
	return fast
}

// goWalkAnswers reports whether the Go object's walk alone answers for obj.
func goWalkAnswers(t *testing.T, m *fieldmanager.Managers, gvk schema.GroupVersionKind, obj k8sruntime.Object) bool {
	_, ok := m.CreateGoWalk(gvk, newObject(t, gvk), obj.DeepCopyObject(), "m")
	return ok
}

// untimed is obj as JSON with its managedFields' times removed.
func untimed(t *testing.T, obj k8sruntime.Object) []byte {
	t.Helper()
	obj = obj.DeepCopyObject()
	acc := obj.(metav1.Object)
	entries := acc.GetManagedFields()
	for i := range entries {
		entries[i].Time = nil
	}
	acc.SetManagedFields(entries)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type createCase struct {
	name string
	gvk  schema.GroupVersionKind
	doc  string
	// slow says the library's path must answer (the fast path declines).
	slow bool
	// valueWalk says the fast path's value walk answers, not the Go object's walk
	// (custom resources, duplicate list items).
	valueWalk bool
}

var createCases = []createCase{
	{name: "bench pod", gvk: podGVK, doc: `
metadata: {name: p, namespace: default, labels: {app: bench, tier: backend}}
spec: {containers: [{name: app, image: registry.example/app:1.0, ports: [{containerPort: 8080}]}]}`},
	{name: "pod with everything", gvk: podGVK, doc: `
metadata:
  generateName: p-
  namespace: default
  labels: {app: web}
  annotations: {note: "x", empty: ""}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: "1", controller: true}]
  finalizers: [example.com/keep]
spec:
  initContainers: [{name: init, image: busybox, command: [sh, -c, "true"]}]
  containers:
  - name: app
    image: nginx
    env: [{name: A, value: "1"}, {name: B, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    ports: [{containerPort: 80, protocol: TCP}, {containerPort: 80, protocol: UDP}]
    resources: {limits: {cpu: "1", memory: 1Gi}, requests: {cpu: 100m}}
    volumeMounts: [{name: data, mountPath: /data}]
    securityContext: {runAsUser: 1000, capabilities: {add: [NET_ADMIN], drop: [ALL]}}
    readinessProbe: {httpGet: {path: /, port: 80}}
  - name: side
    image: busybox
    args: []
  volumes: [{name: data, emptyDir: {}}, {name: cfg, configMap: {name: c, items: [{key: a, path: a}]}}]
  nodeSelector: {disk: ssd}
  tolerations: [{key: k, operator: Exists}, {key: k, operator: Exists}]
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: In, values: [b]}]}]}}}
  securityContext: {}
  hostAliases: [{ip: 10.0.0.1, hostnames: [a]}]
  dnsConfig: {options: [{name: ndots, value: "2"}]}
status: {phase: Pending}`},
	{name: "pod with duplicate containers and env", gvk: podGVK, valueWalk: true, doc: `
metadata: {name: dup, namespace: default}
spec:
  containers:
  - {name: a, image: x, env: [{name: E, value: "1"}, {name: E, value: "2"}]}
  - {name: a, image: y}`},
	{name: "pod with creationTimestamp and empty maps", gvk: podGVK, doc: `
metadata: {name: t, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z", labels: {}, annotations: {}}
spec: {containers: [{name: a, image: x}], nodeSelector: {}}`},
	{name: "pod with client managedFields", gvk: podGVK, slow: true, doc: `
metadata:
  name: m
  namespace: default
  managedFields: [{manager: someone, operation: Update, apiVersion: v1, fieldsType: FieldsV1, fieldsV1: {"f:metadata": {"f:labels": {}}}}]
spec: {containers: [{name: a, image: x}]}`},
	{name: "pod with a container without a name", gvk: podGVK, doc: `
metadata: {name: n, namespace: default}
spec: {containers: [{image: x}]}`},
	{name: "deployment", gvk: deploymentGVK, doc: `
metadata: {name: d, namespace: default, labels: {app: d}}
spec:
  replicas: 3
  selector: {matchLabels: {app: d}}
  strategy: {rollingUpdate: {maxSurge: 25%}}
  template:
    metadata: {labels: {app: d}}
    spec: {containers: [{name: c, image: nginx, ports: [{containerPort: 80}]}]}`},
	{name: "deployment with the template's creationTimestamp set", gvk: deploymentGVK, doc: `
metadata: {name: d, namespace: default}
spec:
  selector: {matchLabels: {app: d}}
  template:
    metadata: {labels: {app: d}, creationTimestamp: "2026-01-01T00:00:00Z"}
    spec: {containers: [{name: c, image: nginx}]}`},
	{name: "empty deployment", gvk: deploymentGVK, doc: `metadata: {name: d, namespace: default}`},
	{name: "service", gvk: serviceGVK, doc: `
metadata: {name: s, namespace: default}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}, {name: dns, port: 53, protocol: UDP, targetPort: dns}]
  ipFamilies: [IPv4]`},
	{name: "headless service", gvk: serviceGVK, valueWalk: true, doc: `
metadata: {name: h, namespace: default}
spec: {clusterIP: None, ports: [{port: 80}, {port: 80}]}`},
	{name: "configmap", gvk: configMapGVK, doc: `
metadata: {name: c, namespace: default}
data: {a: "1", b: ""}
binaryData: {bin: aGVsbG8=}`},
	{name: "empty configmap", gvk: configMapGVK, doc: `metadata: {name: e, namespace: default}`},
	{name: "configmap with only a name", gvk: configMapGVK, doc: `metadata: {name: e}`},
	{name: "widget", gvk: widgetGVK, valueWalk: true, doc: `
metadata: {name: w, namespace: default, labels: {a: b}}
spec:
  size: 3
  color: red
  port: http
  free: {anything: [1, {b: c}], nested: {deep: null}}
  tags: [a, b, a]
  items: [{name: "x", value: "1"}, {name: "y"}]
  plain: [{a: "1"}, {a: "1"}]
  labels: {}
status: {ready: true}`},
	{name: "widget with unknown fields", gvk: widgetGVK, slow: true, doc: `
metadata: {name: w, namespace: default}
spec: {unknown: 1, size: 2}
extra: {x: y}`},
	{name: "widget with a wrong type", gvk: widgetGVK, slow: true, doc: `
metadata: {name: w, namespace: default}
spec: {size: "three", items: [{value: "no name"}]}`},
	{name: "widget with a map item lacking its key", gvk: widgetGVK, slow: true, doc: `
metadata: {name: w, namespace: default}
spec: {items: [{value: v}]}`},
	{name: "widget with null items", gvk: widgetGVK, valueWalk: true, doc: `
metadata: {name: w, namespace: default}
spec: {items: null, tags: null, free: null}`},
	{name: "gadget", gvk: gadgetGVK, valueWalk: true, doc: `
metadata: {name: g, namespace: default}
spec: {anything: [1, 2, {x: [true, null]}], more: {a: {}}}
status: {s: 1}`},
}

func TestCreateFastPathMatchesTheLibrary(t *testing.T) {
	m := managersWithCRDs(t)
	for _, c := range createCases {
		t.Run(c.name, func(t *testing.T) {
			obj, ok := defaulted(t, c.gvk, []byte(c.doc))
			if !ok {
				t.Fatal("the case does not decode")
			}
			for _, manager := range []string{"kubectl-create", "", "a\"b<c>&\u00e9"} {
				if fast := bothPaths(t, m, c.gvk, obj, manager); fast == c.slow {
					t.Errorf("manager %q: fast path answered %v, want %v", manager, fast, !c.slow)
				}
			}
			if answers, want := goWalkAnswers(t, m, c.gvk, obj), !c.slow && !c.valueWalk; answers != want {
				t.Errorf("the Go object's walk answered %v, want %v", answers, want)
			}
		})
	}
}

// TestCreateRecordsWhatACreateSets: the fast path's entry lists the fields the
// object sets, without status or the identity fields.
func TestCreateRecordsWhatACreateSets(t *testing.T) {
	m := managersWithCRDs(t)
	obj, _ := defaulted(t, configMapGVK, []byte(`{metadata: {name: c, namespace: d, labels: {a: b}}, data: {k: v}}`))
	out := m.Create(configMapGVK, newObject(t, configMapGVK), obj, "creator")
	if got, want := fieldsOf(t, out, "creator"), `{"f:data":{".":{},"f:k":{}},"f:metadata":{"f:labels":{".":{},"f:a":{}}}}`; got != want {
		t.Errorf("fields %s, want %s", got, want)
	}
	w, _ := defaulted(t, widgetGVK, []byte(`{metadata: {name: w, namespace: d}, spec: {size: 1}, status: {ready: true}}`))
	out = m.Create(widgetGVK, newObject(t, widgetGVK), w, "creator")
	if got, want := fieldsOf(t, out, "creator"), `{"f:spec":{".":{},"f:size":{}}}`; got != want {
		t.Errorf("fields %s, want %s", got, want)
	}
}

// FuzzCreateFastPath: for any object (JSON mutated from the cases above, decoded into
// the kind the first byte picks), the fast path gives what the library gives, or
// declines.
func FuzzCreateFastPath(f *testing.F) {
	kinds := []schema.GroupVersionKind{podGVK, deploymentGVK, serviceGVK, configMapGVK, widgetGVK, gadgetGVK}
	for _, c := range createCases {
		j, err := yaml.YAMLToJSON([]byte(c.doc))
		if err != nil {
			f.Fatal(err)
		}
		for i, k := range kinds {
			if k == c.gvk {
				f.Add(uint8(i), j)
			}
		}
	}
	m := managersWithCRDs(f)
	f.Fuzz(func(t *testing.T, kind uint8, doc []byte) {
		gvk := kinds[int(kind)%len(kinds)]
		obj, ok := defaulted(t, gvk, doc)
		if !ok {
			return
		}
		bothPaths(t, m, gvk, obj, "fuzz")
	})
}
