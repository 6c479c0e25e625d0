package apiserver_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

// listening reports whether something accepts connections on a local port.
func listening(port string) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func TestComponentStatuses(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	list, err := c.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]corev1.ComponentStatus{}
	for _, cs := range list.Items {
		names = append(names, cs.Name)
		byName[cs.Name] = cs
	}
	if want := []string{"controller-manager", "etcd-0", "scheduler"}; !slices.Equal(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
	if got := byName["etcd-0"].Conditions; len(got) != 1 || got[0].Type != corev1.ComponentHealthy || got[0].Status != corev1.ConditionTrue || got[0].Message != "ok" {
		t.Fatalf("etcd-0 conditions = %+v, want Healthy True ok", got)
	}
	for name, port := range map[string]string{"scheduler": "10259", "controller-manager": "10257"} {
		if listening(port) {
			t.Logf("something listens on %s; not asserting %s is unhealthy", port, name)
			continue
		}
		got := byName[name].Conditions
		if len(got) != 1 || got[0].Status != corev1.ConditionFalse || got[0].Message == "" {
			t.Errorf("%s conditions = %+v, want Healthy False with the failure as message", name, got)
		}
	}

	t.Run("get etcd-0", func(t *testing.T) {
		cs, err := c.CoreV1().ComponentStatuses().Get(ctx, "etcd-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cs.Name != "etcd-0" || len(cs.Conditions) != 1 || cs.Conditions[0].Status != corev1.ConditionTrue {
			t.Fatalf("got %+v", cs)
		}
	})
	t.Run("get unknown", func(t *testing.T) {
		// Upstream's REST answers a plain error: 500 "Component not found: <name>".
		_, err := c.CoreV1().ComponentStatuses().Get(ctx, "nope", metav1.GetOptions{})
		if se, ok := err.(apierrors.APIStatus); !ok || se.Status().Code != http.StatusInternalServerError || se.Status().Message != "Component not found: nope" {
			t.Fatalf("err = %v, want 500 Component not found: nope", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		err := c.CoreV1().RESTClient().Delete().Resource("componentstatuses").Name("etcd-0").Do(ctx).Error()
		if !apierrors.IsMethodNotSupported(err) {
			t.Fatalf("err = %v, want 405 MethodNotAllowed", err)
		}
	})
	t.Run("create", func(t *testing.T) {
		err := c.CoreV1().RESTClient().Post().Resource("componentstatuses").Body([]byte(`{"apiVersion":"v1","kind":"ComponentStatus","metadata":{"name":"x"}}`)).Do(ctx).Error()
		if !apierrors.IsMethodNotSupported(err) {
			t.Fatalf("err = %v, want 405 MethodNotAllowed", err)
		}
	})
	t.Run("watch", func(t *testing.T) {
		_, err := c.CoreV1().ComponentStatuses().Watch(ctx, metav1.ListOptions{})
		if !apierrors.IsMethodNotSupported(err) {
			t.Fatalf("err = %v, want 405 MethodNotAllowed", err)
		}
	})
	t.Run("field selector", func(t *testing.T) {
		list, err := c.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=etcd-0"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "etcd-0" {
			t.Fatalf("items = %+v, want etcd-0 only", list.Items)
		}
	})
	t.Run("table", func(t *testing.T) {
		data, err := c.CoreV1().RESTClient().Get().Resource("componentstatuses").
			SetHeader("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(data, &table); err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, col := range table.ColumnDefinitions {
			cols = append(cols, col.Name)
		}
		if want := []string{"Name", "Status", "Message", "Error"}; !slices.Equal(cols, want) {
			t.Fatalf("columns = %v, want %v", cols, want)
		}
		if len(table.Rows) != 3 {
			t.Fatalf("rows = %+v, want 3", table.Rows)
		}
		etcd := table.Rows[1].Cells
		if etcd[0] != "etcd-0" || etcd[1] != "Healthy" || etcd[2] != "ok" || etcd[3] != "" {
			t.Fatalf("etcd-0 row = %v", etcd)
		}
	})
	t.Run("deprecation_warning", func(t *testing.T) {
		// kubectl prints this Warning, as it does against upstream.
		var warnings []string
		wcfg := rest.CopyConfig(cfg)
		wcfg.WarningHandlerWithContext = warningRecorder(func(msg string) { warnings = append(warnings, msg) })
		if _, err := kubernetes.NewForConfigOrDie(wcfg).CoreV1().ComponentStatuses().Get(ctx, "etcd-0", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if want := []string{"v1 ComponentStatus is deprecated in v1.19+"}; !slices.Equal(warnings, want) {
			t.Fatalf("warnings = %q, want %q", warnings, want)
		}
	})
	t.Run("discovery", func(t *testing.T) {
		resources, err := c.Discovery().ServerResourcesForGroupVersion("v1")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resources.APIResources {
			if r.Name == "componentstatuses" {
				if r.Kind != "ComponentStatus" || r.Namespaced || !slices.Equal(r.ShortNames, []string{"cs"}) || !slices.Equal([]string(r.Verbs), []string{"get", "list"}) {
					t.Fatalf("componentstatuses = %+v", r)
				}
				return
			}
		}
		t.Fatal("componentstatuses not in /api/v1")
	})
	t.Run("aggregated discovery", func(t *testing.T) {
		data, err := c.CoreV1().RESTClient().Get().AbsPath("/api").
			SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Items []struct {
				Versions []struct {
					Resources []struct {
						Resource   string   `json:"resource"`
						Scope      string   `json:"scope"`
						ShortNames []string `json:"shortNames"`
						Verbs      []string `json:"verbs"`
					} `json:"resources"`
				} `json:"versions"`
			} `json:"items"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		for _, r := range doc.Items[0].Versions[0].Resources {
			if r.Resource == "componentstatuses" {
				if r.Scope != "Cluster" || !slices.Equal(r.ShortNames, []string{"cs"}) || !slices.Equal(r.Verbs, []string{"get", "list"}) {
					t.Fatalf("componentstatuses = %+v", r)
				}
				return
			}
		}
		t.Fatal("componentstatuses not in aggregated /api")
	})
}

// warningRecorder is a client-go warning handler that passes each message to f.
type warningRecorder func(msg string)

func (f warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, msg string) {
	f(msg)
}
