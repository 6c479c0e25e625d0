package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const workflowYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: mizzen.local/agnhost:v1
        args: ["netexec"]
        ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  color: blue
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: shop
stringData:
  password: hunter2
`

// TestKubectlWorkflow drives the embedded kubectl through what a user typically does.
func TestKubectlWorkflow(t *testing.T) {
	c := startServer(t, t.TempDir(), freePort(t), "--disable", "agent")

	// The bundled controller-manager and scheduler serve their health and metrics on
	// ports of their own (self-signed, as upstream's): health to anyone, metrics only
	// to a caller the apiserver authorizes, here the admin by its client certificate.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	adminTLS, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	adminTLS.RootCAs, adminTLS.InsecureSkipVerify = nil, true
	anonymous := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	admin := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: adminTLS}}
	eventually(t, 30*time.Second, func() error {
		for _, probe := range []struct {
			client *http.Client
			port   int
			path   string
			code   int
			want   string
		}{
			{anonymous, c.controllerManagerPort, "/healthz", http.StatusOK, "ok"},
			{anonymous, c.controllerManagerPort, "/metrics", http.StatusForbidden, `forbidden: User \"system:anonymous\" cannot get path \"/metrics\"`},
			{admin, c.controllerManagerPort, "/metrics", http.StatusOK, "workqueue_adds_total"},
			{anonymous, c.schedulerPort, "/healthz", http.StatusOK, "ok"},
			{admin, c.schedulerPort, "/metrics", http.StatusOK, "scheduler_pending_pods"},
		} {
			resp, err := probe.client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", probe.port, probe.path))
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != probe.code || !strings.Contains(string(body), probe.want) {
				return fmt.Errorf(":%d%s: %s %q, want %d with %q", probe.port, probe.path, resp.Status, body, probe.code, probe.want)
			}
		}
		return nil
	})

	out := c.kubectlStdin(workflowYAML, "apply", "-f", "-")
	for _, want := range []string{"namespace/shop created", "deployment.apps/web created", "service/web created", "configmap/settings created", "secret/creds created"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	// A second apply changes nothing.
	if out := c.kubectlStdin(workflowYAML, "apply", "-f", "-"); !strings.Contains(out, "deployment.apps/web unchanged") {
		t.Errorf("second apply: %s", out)
	}

	// get in each output format.
	wide := c.kubectl("get", "deploy", "web", "-n", "shop", "-o", "wide")
	if !strings.Contains(wide, "SELECTOR") || !strings.Contains(wide, "app=web") || !strings.Contains(wide, "mizzen.local/agnhost:v1") {
		t.Errorf("get -o wide:\n%s", wide)
	}
	svc := map[string]interface{}{}
	if err := json.Unmarshal([]byte(c.kubectl("get", "svc", "web", "-n", "shop", "-o", "json")), &svc); err != nil {
		t.Fatal(err)
	}
	ip := svc["spec"].(map[string]interface{})["clusterIP"].(string)
	if !strings.HasPrefix(ip, "10.") {
		t.Errorf("service got cluster IP %q, want one from 10.96.0.0/12", ip)
	}
	yaml := c.kubectl("get", "secret", "creds", "-n", "shop", "-o", "yaml")
	if !strings.Contains(yaml, "password: aHVudGVyMg==") {
		t.Errorf("secret stringData not stored as data:\n%s", yaml)
	}
	if out := c.kubectl("describe", "configmap", "settings", "-n", "shop"); !strings.Contains(out, "color:") || !strings.Contains(out, "blue") {
		t.Errorf("describe:\n%s", out)
	}

	// label, annotate, scale, patch.
	c.kubectl("label", "deploy", "web", "-n", "shop", "tier=frontend")
	c.kubectl("annotate", "deploy", "web", "-n", "shop", "owner=team-a")
	c.kubectl("scale", "deploy", "web", "-n", "shop", "--replicas=4")
	c.kubectl("patch", "deploy", "web", "-n", "shop", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"mizzen.local/agnhost:v2"}]}}}}`)
	got := c.kubectl("get", "deploy", "web", "-n", "shop", "-o", "jsonpath={.metadata.labels.tier} {.metadata.annotations.owner} {.spec.replicas} {.spec.template.spec.containers[0].image} {.metadata.generation}")
	if want := "frontend team-a 4 mizzen.local/agnhost:v2 3"; got != want {
		t.Errorf("after label/annotate/scale/patch: got %q, want %q", got, want)
	}

	// The patch rolled the Deployment out: its controller made a second ReplicaSet and
	// the ReplicaSet controller its pods, each working as its own ServiceAccount
	// (--use-service-account-credentials), which the manager made in kube-system.
	eventually(t, 60*time.Second, func() error {
		out := c.kubectl("get", "rs,pods", "-n", "shop", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.kind} {end}")
		if strings.Count(out, "ReplicaSet") != 2 || strings.Count(out, "Pod") == 0 {
			return fmt.Errorf("ReplicaSets and pods of the rollout: %q, want 2 ReplicaSets and pods", out)
		}
		if out, err := c.kubectlErr("rollout", "history", "deploy/web", "-n", "shop"); err != nil || !strings.Contains(out, "\n2 ") {
			return fmt.Errorf("rollout history: %v %s", err, out)
		}
		return nil
	})
	for _, sa := range []string{"deployment-controller", "replicaset-controller"} {
		if out, err := c.kubectlErr("get", "serviceaccount", sa, "-n", "kube-system"); err != nil {
			t.Errorf("the controller's ServiceAccount kube-system/%s: %v %s", sa, err, out)
		}
	}

	// get -w sees a change made meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watch := exec.CommandContext(ctx, mizzenBin, "kubectl", "--kubeconfig", c.kubeconfig, "get", "configmap", "settings", "-n", "shop", "-w", "-o", "jsonpath={.data.color}{\"\\n\"}")
	stdout, _ := watch.StdoutPipe()
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "blue" {
		t.Fatalf("watch: first line %q", lines.Text())
	}
	c.kubectl("patch", "configmap", "settings", "-n", "shop", "--type=merge", "-p", `{"data":{"color":"green"}}`)
	if !lines.Scan() || lines.Text() != "green" {
		t.Fatalf("watch did not see the change: %q", lines.Text())
	}
	cancel()
	_ = watch.Wait()

	// delete with each cascade mode.
	for _, mode := range []string{"background", "orphan", "foreground"} {
		name := "cm-" + mode
		c.kubectl("create", "configmap", name, "-n", "shop", "--from-literal=k=v")
		out := c.kubectl("delete", "configmap", name, "-n", "shop", "--cascade="+mode)
		if !strings.Contains(out, fmt.Sprintf("configmap %q deleted", name)) {
			t.Errorf("delete --cascade=%s: %s", mode, out)
		}
		if out, err := c.kubectlErr("get", "configmap", name, "-n", "shop"); err == nil || !strings.Contains(out, "NotFound") {
			t.Errorf("after delete --cascade=%s the configmap is still there: %s", mode, out)
		}
	}

	// Deleting the namespace marks it Terminating and refuses new objects in it. A
	// finalizer of the test's own holds it there (the namespace controller would
	// otherwise empty and remove it within moments).
	c.kubectl("patch", "namespace", "shop", "--type=merge", "-p", `{"metadata":{"finalizers":["example.com/hold"]}}`)
	c.kubectl("delete", "namespace", "shop", "--wait=false")
	phase := c.kubectl("get", "namespace", "shop", "-o", "jsonpath={.status.phase}")
	if phase != "Terminating" {
		t.Errorf("namespace phase after delete: %q", phase)
	}
	if out, err := c.kubectlErr("create", "configmap", "late", "-n", "shop"); err == nil || !strings.Contains(out, "because it is being terminated") {
		t.Errorf("create in a terminating namespace: %v %s", err, out)
	}
	// Released, the namespace goes: the controller-manager emptied it meanwhile.
	c.kubectl("patch", "namespace", "shop", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	eventually(t, 60*time.Second, func() error {
		if out, err := c.kubectlErr("get", "namespace", "shop"); err == nil || !strings.Contains(out, "NotFound") {
			return fmt.Errorf("namespace still there: %s", out)
		}
		return nil
	})

	// cordon and uncordon: the node lifecycle controller puts the unschedulable taint on a
	// cordoned node and takes it off again, as upstream's (a Node object without a
	// kubelet is enough).
	c.kubectlStdin("apiVersion: v1\nkind: Node\nmetadata:\n  name: spare\n", "apply", "-f", "-")
	taintKeys := func() string {
		out, _ := c.kubectlErr("get", "node", "spare", "-o", "jsonpath={.spec.taints[*].key}")
		return out
	}
	if out := c.kubectl("cordon", "spare"); !strings.Contains(out, "node/spare cordoned") {
		t.Errorf("cordon: %s", out)
	}
	eventually(t, 30*time.Second, func() error {
		if keys := taintKeys(); !strings.Contains(keys, "node.kubernetes.io/unschedulable") {
			return fmt.Errorf("cordoned node's taints: %q", keys)
		}
		return nil
	})
	c.kubectl("uncordon", "spare")
	eventually(t, 30*time.Second, func() error {
		if keys := taintKeys(); strings.Contains(keys, "node.kubernetes.io/unschedulable") {
			return fmt.Errorf("uncordoned node's taints: %q", keys)
		}
		return nil
	})
	c.kubectl("delete", "node", "spare")
}
