// Command customresources measures custom resource creates against ConfigMap creates
// in the same run, on a real `mizzen server` process (embedded etcd + apiserver): a
// CRD whose schema has 20 fields, defaults and two CEL rules, and the same number of
// objects of each, created by the same concurrent clients (JSON, as clients send
// custom resources; the ConfigMaps are sent as JSON too, so only the server's work
// differs).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"mizzen/bench/internal/benchutil"
)

const crdYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.bench.example.com}
spec:
  group: bench.example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
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
            required: [name, size]
            x-kubernetes-validations:
            - rule: self.minReplicas <= self.maxReplicas
              message: minReplicas must not exceed maxReplicas
            - rule: "!has(self.suffix) || self.suffix.startsWith('-')"
              message: suffix starts with a dash
            properties:
              name: {type: string, maxLength: 63}
              size: {type: integer, minimum: 0}
              color: {type: string, enum: [red, green, blue]}
              minReplicas: {type: integer, default: 1}
              maxReplicas: {type: integer, default: 10}
              suffix: {type: string}
              image: {type: string}
              port: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
              paused: {type: boolean}
              ratio: {type: number}
              owner: {type: string}
              team: {type: string}
              tier: {type: string, default: standard}
              region: {type: string}
              zone: {type: string}
              tags: {type: array, items: {type: string}}
              labels: {type: object, additionalProperties: {type: string}}
              timeout: {type: string, pattern: '^[0-9]+s$'}
              retries: {type: integer, maximum: 10}
              notes: {type: string}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	n := flag.Int("objects", 5000, "objects of each kind to create")
	workers := flag.Int("workers", 50, "concurrent clients")
	flag.Parse()
	if err := run(*bin, *n, *workers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(bin string, n, workers int) error {
	dir, err := os.MkdirTemp("", "mizzen-bench-cr-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port := benchutil.FreePort()
	cmd := exec.Command(bin, "server", "--data-dir", dir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port), "--disable", "agent,scheduler,controller-manager")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var cfg *rest.Config
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 60*time.Second {
			return fmt.Errorf("server not ready after 60s")
		}
		if c, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig")); err == nil {
			if body, err := kubernetes.NewForConfigOrDie(c).Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background()); err == nil && string(body) == "ok" {
				cfg = c
				break
			}
		}
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/json"
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cfg)
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(crdYAML), &crd.Object); err != nil {
		return err
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t0 := time.Now()
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return err
	}
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	for {
		if _, err := widgets.List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			break
		}
		if time.Since(t0) > 30*time.Second {
			return fmt.Errorf("widgets not served after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("CRD create to its resource served: %v\n", time.Since(t0).Round(time.Millisecond))

	client := kubernetes.NewForConfigOrDie(cfg)
	configMap := func(i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"app": "bench"}},
			Data: map[string]string{"name": "widget", "size": "3", "color": "red", "image": "registry.example/app:1.0", "owner": "team-a"}}
		_, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	widget := func(i int) error {
		w := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "bench.example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"name": fmt.Sprintf("w-%05d", i), "labels": map[string]interface{}{"app": "bench"}},
			"spec": map[string]interface{}{"name": "widget", "size": int64(3), "color": "red", "image": "registry.example/app:1.0",
				"owner": "team-a", "port": "http", "suffix": "-x", "tags": []interface{}{"a", "b"}, "timeout": "30s"},
		}}
		_, err := widgets.Create(ctx, w, metav1.CreateOptions{})
		return err
	}
	for round := 0; round < 2; round++ {
		for _, c := range []struct {
			name   string
			create func(int) error
		}{{"ConfigMap", configMap}, {"Widget (custom resource)", widget}} {
			offset := round * n
			rate, p50, p99, errs := createAll(n, workers, func(i int) error { return c.create(offset + i) })
			fmt.Printf("round %d: %s creates: %.0f/s with %d clients (p50 %v, p99 %v, %d errors)\n", round+1, c.name, rate, workers, p50, p99, errs)
		}
	}
	return nil
}

func createAll(n, workers int, create func(int) error) (float64, time.Duration, time.Duration, int64) {
	var next, errs atomic.Int64
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				s := time.Now()
				if err := create(int(i)); err != nil {
					if errs.Add(1) == 1 {
						fmt.Fprintln(os.Stderr, "create:", err)
					}
				}
				lat[w] = append(lat[w], time.Since(s))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return float64(n) / elapsed.Seconds(), benchutil.Percentile(all, 0.5).Round(time.Microsecond), benchutil.Percentile(all, 0.99).Round(time.Microsecond), errs.Load()
}
