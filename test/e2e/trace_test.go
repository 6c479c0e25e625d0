package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const tracedYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: traced
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: traced}
  template:
    metadata:
      labels: {app: traced}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: ` + agnhostImage + `
        args: ["pause"]
`

// traceSteps is the journey of a one-container pod whose image is on the node.
var traceSteps = []string{"created", "scheduled", "accepted by kubelet", "sandbox ready",
	"image ready (main)", "container created (main)", "container started (main)", "ready"}

// TestTrace starts a fresh Deployment and checks that `mizzen trace pod` shows every
// step of a pod's start in order, each recorded by the component that did it, with
// times that never go back, and that `mizzen trace deployment` summarises both pods.
func TestTrace(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs containerd")
	}
	c, _ := clusterWithAgent(t, hpaClusterCIDR, hpaServiceCIDR, hpaBridge)
	eventually(t, 240*time.Second, func() error {
		out := c.kubectl("get", "nodes", "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
		if strings.TrimSpace(out) != "True" {
			return fmt.Errorf("node not ready: %q", out)
		}
		return nil
	})
	c.kubectlStdin(tracedYAML, "apply", "-f", "-")
	eventually(t, 180*time.Second, func() error {
		out := c.kubectl("get", "deployment", "traced", "-o", "jsonpath={.status.readyReplicas}")
		if strings.TrimSpace(out) != "2" {
			return fmt.Errorf("ready replicas %q", out)
		}
		return nil
	})
	pod := strings.Fields(c.kubectl("get", "pods", "-l", "app=traced", "-o", "jsonpath={.items[*].metadata.name}"))[0]
	trace := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(mizzenBin, append([]string{"trace", "--kubeconfig", c.kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("mizzen trace %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// The kubelet's events reach the apiserver asynchronously: wait for the journey
	// to be complete.
	var out string
	eventually(t, 30*time.Second, func() error {
		out = trace("pod", pod, "-n", "default")
		if strings.Contains(out, "Not recorded") {
			return fmt.Errorf("incomplete:\n%s", out)
		}
		return nil
	})
	t.Logf("mizzen trace pod %s:\n%s", pod, out)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		// Present only if the scheduler's first attempt failed (the node was not
		// schedulable yet): an optional step.
		if !strings.HasPrefix(l, "first scheduling attempt") {
			lines = append(lines, l)
		}
	}
	if len(lines) < len(traceSteps)+2 {
		t.Fatalf("too few lines:\n%s", out)
	}
	components := map[string]string{"created": "kube-apiserver", "scheduled": "default-scheduler"}
	var prev string
	for i, want := range traceSteps {
		line := lines[2+i]
		if !strings.HasPrefix(line, want+"  ") {
			t.Errorf("step %d: %q, want %q", i, line, want)
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, want))
		comp := components[want]
		if comp == "" {
			comp = "kubelet/"
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], comp) {
			t.Errorf("step %s: fields %q, want component %s", want, f, comp)
			continue
		}
		// AT is HH:MM:SS[.mmm]: at the second, no step comes before the one above.
		sec := f[1][:8]
		if prev != "" && sec < prev {
			t.Errorf("step %s at %s, before the step above (%s)", want, f[1], prev)
		}
		prev = sec
	}

	out = trace("deployment", "traced", "-n", "default")
	t.Logf("mizzen trace deployment traced:\n%s", out)
	if !strings.Contains(out, "Deployment default/traced: 2 pods, 2 ready") {
		t.Errorf("deployment summary header:\n%s", out)
	}
	for _, step := range traceSteps {
		if !strings.Contains(out, "\n"+step+"  ") {
			t.Errorf("deployment summary lacks step %q", step)
		}
	}
}
