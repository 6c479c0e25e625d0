package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Network of the autoscaling test's cluster: distinct from other clusters on this host.
const (
	hpaClusterCIDR = "10.233.0.0/16"
	hpaServiceCIDR = "10.115.0.0/16"
	hpaBridge      = "mzn-hpa"
)

// consumerYAML is a Deployment of agnhost's resource-consumer that asks for little
// CPU (the host is shared), so that a small burn is far above the target.
const consumerYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: consumer}
  template:
    metadata:
      labels: {app: consumer}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: consumer
        image: ` + agnhostImage + `
        args: ["resource-consumer", "--port", "8080"]
        resources:
          requests: {cpu: 10m}
`

// clusterWithAgent starts `mizzen server` with its agent on this test's network, the
// test images available to the agent, and a metrics server that scrapes every 2 s.
func clusterWithAgent(t *testing.T, cidr, serviceCIDR, bridge string) (*cluster, string) {
	t.Helper()
	requireNodeRuntime(t)
	images := testImages(t)
	dataDir := t.TempDir()
	stageImages(t, dataDir, images, "agnhost.tar", "busybox.tar")
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", cidr, "--service-cluster-ip-range", serviceCIDR,
		"--pod-bridge", bridge, "--kubelet-port", strconv.Itoa(freePort(t)),
		"--kubelet-certificate-authority", filepath.Join(dataDir, "tls", "ca.crt"), "--metric-resolution", "2s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", c.log.String())
		}
		cleanupHost(t, c, dataDir, bridge)
	})
	return c, dataDir
}

// TestHorizontalPodAutoscaler runs a Deployment whose one pod is made to burn CPU
// above its request, autoscales it with `kubectl autoscale`, and checks that the HPA
// scales it up while the load lasts and back to one pod after it stops.
func TestHorizontalPodAutoscaler(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	c, _ := clusterWithAgent(t, hpaClusterCIDR, hpaServiceCIDR, hpaBridge)
	c.kubectlStdin(consumerYAML, "apply", "-f", "-")
	if out := c.kubectl("autoscale", "deployment", "web", "--cpu-percent=50", "--min=1", "--max=3"); !strings.Contains(out, "horizontalpodautoscaler.autoscaling/web autoscaled") {
		t.Fatalf("kubectl autoscale: %s", out)
	}
	// A short scale-down window keeps the test short (the default is five minutes).
	c.kubectl("patch", "hpa", "web", "--type", "merge", "-p", `{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":10}}}}`)
	// Both API versions serve it: v1 shows the CPU target as its own field.
	if got := strings.TrimSpace(c.kubectl("get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "jsonpath={.spec.targetCPUUtilizationPercentage}")); got != "50" {
		t.Errorf("autoscaling/v1 targetCPUUtilizationPercentage %q, want 50", got)
	}

	var podIP string
	eventually(t, 180*time.Second, func() error {
		out, err := c.kubectlErr("get", "pods", "-l", "app=consumer", "-o", `jsonpath={range .items[*]}{.status.podIP} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		f := strings.Fields(out)
		if len(f) != 2 || f[1] != "True" {
			return fmt.Errorf("consumer pod not ready: %q", out)
		}
		podIP = f[0]
		return nil
	})

	// Before any load the HPA reads the pod's usage and sees it under the target.
	targets := regexp.MustCompile(`cpu: (\d+)%/50%`)
	eventually(t, 120*time.Second, func() error {
		out := c.kubectl("get", "hpa", "web")
		if m := targets.FindStringSubmatch(out); m == nil {
			return fmt.Errorf("kubectl get hpa shows no cpu utilization yet:\n%s", out)
		}
		return nil
	})

	// 50m on a 10m request is 500% of the target's 50%: the HPA wants ten pods and
	// maxReplicas allows three.
	if out, err := httpGet("http://" + podIP + ":8080/ConsumeCPU?millicores=50&durationSec=50"); err != nil || !strings.Contains(out, "ConsumeCPU") {
		t.Fatalf("ConsumeCPU: %v %q", err, out)
	}
	eventually(t, 150*time.Second, func() error {
		replicas := strings.TrimSpace(c.kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"))
		if replicas == "1" {
			return fmt.Errorf("deployment still at 1 replica; hpa:\n%s", c.kubectl("get", "hpa", "web"))
		}
		return nil
	})
	out := c.kubectl("get", "hpa", "web")
	t.Logf("under load:\n%s", out)
	if m := targets.FindStringSubmatch(out); m != nil {
		if n, _ := strconv.Atoi(m[1]); n <= 50 {
			t.Errorf("TARGETS under load shows %s%%, not above 50%%:\n%s", m[1], out)
		}
	}
	events := c.kubectl("get", "events", "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler,reason=SuccessfulRescale", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
	if !regexp.MustCompile(`New size: [23]; reason: cpu resource utilization \(percentage of request\) above target`).MatchString(events) {
		t.Errorf("no scale-up event: %q", events)
	}

	// The burn ends by itself; with the pods idle the HPA goes back to one.
	eventually(t, 180*time.Second, func() error {
		replicas := strings.TrimSpace(c.kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"))
		if replicas != "1" {
			return fmt.Errorf("deployment at %s replicas; hpa:\n%s", replicas, c.kubectl("get", "hpa", "web"))
		}
		return nil
	})
	events = c.kubectl("get", "events", "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler,reason=SuccessfulRescale", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
	if !strings.Contains(events, "New size: 1; reason: All metrics below target") {
		t.Errorf("no scale-down event: %q", events)
	}
	desc := c.kubectl("describe", "hpa", "web")
	t.Logf("kubectl describe hpa:\n%s", desc)
	for _, want := range []string{"AbleToScale", "ScalingActive", "True    ValidMetricFound", "ScalingLimited"} {
		if !strings.Contains(desc, want) {
			t.Errorf("describe hpa lacks %q", want)
		}
	}
}
