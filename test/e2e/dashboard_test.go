package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/pki"
)

// Network of the dashboard test's cluster: distinct from other clusters on this host.
const (
	dashBridge      = "mzn-dash"
	dashClusterCIDR = "10.235.0.0/16"
	dashServiceCIDR = "10.117.0.0/16"
)

const dashDeploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: ` + busyboxImage + `
        command: ["sh", "-c", "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 1; done"]
`

// TestDashboard drives the bundled dashboard in headless Chromium as a user would: log
// in with a ServiceAccount token, see the node Ready on the overview, open a pod, read
// its logs, run hostname in its terminal (also with the page's first requests lost to
// the network), scale a Deployment and watch the pods follow; then, logged in as a
// user bound only to the view role, be refused a delete by RBAC. An object page shows
// what the object owns as of the latest load, also when an older one comes back last.
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("runs containerd and a browser")
	}
	requireNodeRuntime(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (make deps)")
	}
	images := testImages(t)
	dataDir := t.TempDir()
	c := startServer(t, dataDir, freePort(t), "--cluster-cidr", dashClusterCIDR, "--pod-bridge", dashBridge,
		"--service-cluster-ip-range", dashServiceCIDR, "--kubelet-port", strconv.Itoa(freePort(t)),
		"--kubelet-certificate-authority", filepath.Join(dataDir, "tls", "ca.crt"))
	t.Cleanup(func() { cleanupHost(t, c, dataDir, dashBridge) })
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	node := readyNode(t, ctx, client, dataDir, images)
	if !strings.Contains(c.log.String(), fmt.Sprintf("mizzen dashboard at https://127.0.0.1:%d/", c.dashboardPort)) {
		t.Errorf("the server did not print the dashboard's URL:\n%s", c.log.String())
	}

	// Two users, as docs/dashboard.md tells: an administrator and a viewer.
	c.kubectl("create", "serviceaccount", "dash-admin")
	c.kubectl("create", "clusterrolebinding", "dash-admin", "--clusterrole", "cluster-admin", "--serviceaccount", "default:dash-admin")
	c.kubectl("create", "serviceaccount", "dash-viewer")
	c.kubectl("create", "rolebinding", "dash-viewer", "--clusterrole", "view", "--serviceaccount", "default:dash-viewer")
	adminToken := strings.TrimSpace(c.kubectl("create", "token", "dash-admin"))
	viewerToken := strings.TrimSpace(c.kubectl("create", "token", "dash-viewer"))

	c.kubectlStdin(dashDeploymentYAML, "apply", "-f", "-")
	var pod string
	eventually(t, 120*time.Second, func() error {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if runningAndReady(&p) == nil {
				pod = p.Name
				return nil
			}
		}
		return fmt.Errorf("no Running and Ready pod of the Deployment yet")
	})

	b := newBrowser(t, chromium, fmt.Sprintf("https://127.0.0.1:%d", c.dashboardPort))
	b.login(adminToken)

	t.Run("overview shows the node Ready", func(t *testing.T) {
		b.t = t
		b.waitJS(`(document.querySelector('tr[data-component="kubelet-`+node+`"] td.ok') || {}).textContent === 'healthy'`, "the node's kubelet healthy on the overview")
		b.waitJS(`!!document.querySelector('svg.star g[data-component="apiserver"] rect.ok')`, "the apiserver drawn healthy")
		// The node's service proxy, asked for its /healthz through the apiserver's node proxy.
		b.waitJS(`(document.querySelector('tr[data-component="proxy-`+node+`"] td.ok') || {}).textContent === 'healthy'`, "the node's service proxy healthy on the overview")
		b.screenshot("overview")
	})

	t.Run("open a pod and read its logs", func(t *testing.T) {
		b.t = t
		b.go_("#/list/pods")
		b.click(fmt.Sprintf(`#list tr[data-name="%s"] a`, pod))
		b.waitJS(`(document.getElementById('object-name') || {}).textContent === '`+pod+`'`, "the pod's page")
		b.waitJS(`document.getElementById('yaml').value.includes('image: `+busyboxImage+`')`, "the pod's YAML")
		b.waitJS(`document.getElementById('events').textContent.includes('Started')`, "the pod's events")
		b.click("#action-logs")
		b.waitJS(`/tick-\d+\n/.test((document.getElementById('logs') || {}).textContent || '')`, "the pod's log lines")
		// Following: a line written after the page opened shows up.
		first := b.evalInt(`Math.max(...[...document.getElementById('logs').textContent.matchAll(/tick-(\d+)/g)].map(m => +m[1]))`)
		b.waitJS(fmt.Sprintf(`document.getElementById('logs').textContent.includes('tick-%d\n')`, first+2), "a followed log line")
		// The browser abandons its open streams when the machine's network changes (as
		// when another cluster on this host starts a pod); the page follows on, with no
		// line lost or shown twice.
		last := b.evalInt(`Math.max(...[...document.getElementById('logs').textContent.matchAll(/tick-(\d+)/g)].map(m => +m[1]))`)
		changeHostNetwork(t, "mzn-dashchg", "10.235.255.1/30")
		b.waitJS(fmt.Sprintf(`document.getElementById('logs').textContent.includes('tick-%d\n')`, last+4), "a log line followed after the network changed")
		ticks := b.evalString(`[...document.getElementById('logs').textContent.matchAll(/tick-(\d+)/g)].map(m => m[1]).join(' ')`)
		for i, n := range strings.Fields(ticks) {
			if n != strconv.Itoa(i) {
				t.Fatalf("the log shows tick-%s where tick-%d belongs: %s", n, i, ticks)
			}
		}
	})

	t.Run("terminal runs hostname", func(t *testing.T) {
		b.t = t
		b.go_(fmt.Sprintf("#/obj/pods/default/%s", pod))
		b.hostnameInTerminal(pod)
		b.screenshot("terminal")
	})

	// The first requests of a page lost to the network, as other clusters changing this
	// host's links lose them (see appStarted): the page's own load of xterm.js, the pods
	// list's first list, and each page's first fetch of the pod (the object page's, the
	// logs page's, the terminal page's) and an object page's list of what the object
	// owns, the namespace picker's list of namespaces, and the overview's settings. The
	// pages try them again: the user sees the pods, the pod, its log, its terminal, the
	// Deployment's ReplicaSet, the namespaces to pick from and the node's service proxy
	// healthy, not "Failed to fetch", a silently empty list or "the dashboard was given
	// no proxy health port", and gets a terminal, not "window.Terminal is not a
	// constructor".
	t.Run("requests lost to the network are tried again", func(t *testing.T) {
		xterm, podList := "/static/vendor/xterm/xterm.js", "/k8s/api/v1/pods" // the list's URL; its watch's has a query
		// The pod's URL: its log's and exec's have further segments, its watch's a query.
		podObj := "/k8s/api/v1/namespaces/default/pods/" + pod
		rsList := "/k8s/apis/apps/v1/namespaces/default/replicasets" // the Deployment page's list of what it owns
		nsList := "/k8s/api/v1/namespaces"                           // the namespace picker's list
		// The pod page's list of the pod's events; its watch's URL goes on.
		evList := "/k8s/api/v1/namespaces/default/events?fieldSelector=" + url.QueryEscape("involvedObject.name="+pod)
		// shown loads hash afresh in tab and waits for want, failing on an error shown.
		shown := func(tab *browser, hash, want, what string) {
			t.Helper()
			tab.navigate("about:blank") // so that the page below is a fresh load
			tab.go_(hash)
			tab.waitJS(want+` || !!document.getElementById('error').textContent`, what+", or an error")
			if msg := tab.evalString(`document.getElementById('error').textContent`); msg != "" {
				tab.screenshot("failed")
				t.Fatalf("%s: the page shows the error %q", what, msg)
			}
		}
		wantLost := func(lost func() ([]string, error), want ...string) {
			t.Helper()
			if got, err := lost(); len(got) != len(want) || err != nil {
				t.Fatalf("requests lost: %v (%v), want the first of each of %v", got, err, want)
			}
		}
		lb := b.newTab(t)
		lb.login(adminToken)
		lost := lb.loseFirstRequests(xterm, podList, podObj, evList, nsList)
		shown(lb, "#/list/pods", `!!document.querySelector('#list tr[data-name="`+pod+`"]')`, "the pods listed")
		lb.waitJS(`!!document.querySelector('#namespaces option[value="default"]')`, "the namespaces to pick from")
		shown(lb, fmt.Sprintf("#/obj/pods/default/%s", pod), `document.getElementById('yaml').value.includes('image: `+busyboxImage+`')`, "the pod's page")
		lb.waitJS(`document.getElementById('events').textContent.includes('Started')`, "the pod's events")
		wantLost(lost, xterm, podList, podObj, evList, nsList)
		lb.hostnameInTerminal(pod)

		// The logs page's and the terminal page's own first fetch of the pod, each in a
		// tab of its own (a tab loses only the first request of each suffix).
		logs := b.newTab(t)
		logs.login(adminToken)
		lost = logs.loseFirstRequests(podObj, rsList)
		shown(logs, fmt.Sprintf("#/logs/default/%s?container=main", pod), `/tick-\d+\n/.test((document.getElementById('logs') || {}).textContent || '')`, "the pod's log lines")
		shown(logs, "#/obj/deployments/default/web", `!!document.querySelector('#owned li')`, "the Deployment's owned objects")
		if owned := logs.evalString(`document.getElementById('owned').textContent`); !strings.Contains(owned, "ReplicaSet web-") {
			logs.screenshot("failed")
			t.Fatalf("the Deployment's page lists as owned %q, want its ReplicaSet", owned)
		}
		wantLost(lost, podObj, rsList)
		term := b.newTab(t)
		term.login(adminToken)
		lost = term.loseFirstRequests(podObj)
		shown(term, fmt.Sprintf("#/exec/default/%s?container=main", pod), `!!document.getElementById('exec-state')`, "the pod's terminal")
		wantLost(lost, podObj)
		overview := b.newTab(t)
		overview.login(adminToken)
		lost = overview.loseFirstRequests("/settings")
		shown(overview, "#/overview", `(document.querySelector('tr[data-component="proxy-`+node+`"] td.ok') || {}).textContent === 'healthy'`, "the node's service proxy healthy on the overview")
		wantLost(lost, "/settings")
	})

	// An object page loads what the object owns again on each change of the object, and
	// loads overlap when changes come quickly. The first load of a ReplicaSet's page has
	// its pods list held until a load started by a change of the ReplicaSet has shown
	// the current pods, then answered with an older list, holding a pod since gone: the
	// page keeps showing the newer list.
	t.Run("an older load of owned objects answered last does not overwrite a newer one", func(t *testing.T) {
		rss, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(rss.Items) != 1 {
			t.Fatalf("listing the Deployment's ReplicaSet: %v (%d ReplicaSets)", err, len(rss.Items))
		}
		rs := rss.Items[0]
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, p := range pods.Items {
			if slices.ContainsFunc(p.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == rs.UID }) {
				want = append(want, "Pod "+p.Name)
			}
		}
		if len(want) == 0 {
			t.Fatalf("ReplicaSet %s owns no pod", rs.Name)
		}
		stale := pods.DeepCopy()
		stale.Kind, stale.APIVersion = "PodList", "v1"
		controller := true
		stale.Items = append(stale.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rs.Name + "-gone", Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &controller}}}})
		staleBody, err := json.Marshal(stale)
		if err != nil {
			t.Fatal(err)
		}

		tab := b.newTab(t)
		tab.login(adminToken)
		tab.navigate("about:blank") // so that the page below is a fresh load
		// The list of the namespace's pods, in which the page looks for those it owns.
		held := tab.holdFirstRequest("/k8s/api/v1/namespaces/default/pods")
		tab.go_("#/obj/replicasets/default/" + rs.Name)
		var first fetch.RequestID
		select {
		case first = <-held:
		case <-time.After(90 * time.Second):
			t.Fatalf("the ReplicaSet's page never asked for the pods (page: %s)", tab.page())
		}
		c.kubectl("annotate", "replicaset", rs.Name, "example.com/changed=by-the-dashboard-test", "--overwrite")
		ownedNow := `[...document.querySelectorAll('#owned li')].map(li => li.textContent).join(', ')`
		wantShown := strings.Join(want, ", ")
		tab.waitJS(fmt.Sprintf(`%s === %q`, ownedNow, wantShown), "the ReplicaSet's pods, loaded again after it changed")
		if _, err := chromedp.Call(tab.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: first, ResponseCode: 200,
			ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}}, Body: staleBody}); err != nil {
			t.Fatalf("answering the first load's pods list: %v", err)
		}
		// A request the page makes now comes back after the page has read that answer.
		if _, err := chromedp.Run(tab.ctx, chromedp.Evaluate[bool](`fetch('/k8s/api/v1/namespaces/default/pods?limit=1').then(r => new Promise(done => setTimeout(() => done(r.ok), 0)))`, chromedp.EvalAwaitPromise)); err != nil {
			t.Fatal(err)
		}
		if got := tab.evalString(ownedNow); got != wantShown {
			tab.screenshot("failed")
			t.Fatalf("the ReplicaSet's page lists as owned %q once the older load came back, want the newer %q", got, wantShown)
		}
	})

	t.Run("a pod's journey and its Deployment's", func(t *testing.T) {
		b.t = t
		b.go_(fmt.Sprintf("#/obj/pods/default/%s", pod))
		// Every step of a Ready pod, in order, each with the component that recorded it.
		for _, step := range []string{"created", "scheduled", "accepted by kubelet", "sandbox ready", "container started (main)", "ready"} {
			b.waitJS(fmt.Sprintf(`!!document.querySelector('#journey-steps tr[data-step=%q]')`, step), "the journey step "+step)
		}
		b.waitJS(`[...document.querySelectorAll('#journey-steps tr.step')].map(r => r.dataset.step).join('|').startsWith('created|')`, "the journey starting at creation")
		b.waitJS(`(document.querySelector('#journey-steps tr[data-step="scheduled"]').children[1].textContent).length > 0`, "the scheduler named as the recorder of the binding")
		b.waitJS(`!document.getElementById('journey-pending')`, "no step still pending for a Ready pod")
		b.screenshot("journey")
		b.go_("#/obj/deployments/default/web")
		b.waitJS(`/^\d+ pods, \d+ ready$/.test((document.getElementById('journeys-count') || {}).textContent || '')`, "the Deployment's pod count")
		b.waitJS(`!!document.querySelector('#journeys tr[data-step="ready"]')`, "the Deployment's Ready step percentiles")
	})

	t.Run("edit and apply YAML, restart", func(t *testing.T) {
		b.t = t
		b.go_("#/obj/deployments/default/web")
		b.waitJS(`document.getElementById('yaml').value.includes('  annotations:\n')`, "the Deployment's YAML")
		b.waitJS(`/^ReplicaSet web-/.test(document.querySelector('#owned a').textContent)`, "the Deployment's ReplicaSet among what it owns")
		b.screenshot("deployment")
		// Typing into the editor, in one go.
		b.waitJS(`(() => { const ta = document.getElementById('yaml');
			ta.value = ta.value.replace('  annotations:\n', '  annotations:\n    example.com/edited: by-the-dashboard\n');
			ta.dispatchEvent(new Event('input')); return true; })()`, "the YAML edited")
		b.click("#apply")
		eventually(t, 30*time.Second, func() error {
			d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Annotations["example.com/edited"] != "by-the-dashboard" {
				return fmt.Errorf("annotations %v (page: %s)", d.Annotations, b.page())
			}
			for _, mf := range d.ManagedFields {
				if mf.Manager == "mizzen-dashboard" && mf.Operation == metav1.ManagedFieldsOperationApply {
					return nil
				}
			}
			return fmt.Errorf("no Apply entry of manager mizzen-dashboard in managedFields")
		})
		b.click("#action-restart")
		b.do(chromedp.WaitVisible(chromedp.ID("dialog-ok")))
		b.click("#dialog-ok")
		eventually(t, 30*time.Second, func() error {
			d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
				return fmt.Errorf("no restartedAt annotation on the pod template (page: %s)", b.page())
			}
			return nil
		})
	})

	t.Run("scale a Deployment", func(t *testing.T) {
		b.t = t
		b.go_("#/obj/deployments/default/web")
		b.click("#action-scale")
		b.do(chromedp.WaitVisible(chromedp.ID("dialog-input")))
		b.do(chromedp.SetValue(chromedp.ID("dialog-input"), "3"))
		b.click("#dialog-ok")
		b.go_("#/list/pods")
		b.waitJS(`document.querySelectorAll('#list tr[data-name^="web-"]').length === 3`, "three pods of the Deployment listed")
		b.waitJS(`[...document.querySelectorAll('#list tr[data-name^="web-"]')].every(tr => tr.textContent.includes('Running'))`, "three Running pods")
		b.screenshot("pods")
		b.go_("#/list/deployments")
		b.waitJS(`(document.querySelector('#list tr[data-name="web"]') || {}).textContent.includes('3/3')`, "READY 3/3 on the Deployments list")
		// The list follows changes made elsewhere, through its watch, without a reload.
		b.go_("#/list/pods")
		b.waitJS(`document.querySelectorAll('#list tr[data-name^="web-"]').length === 3`, "three pods listed")
		b.evalBool(`window.notReloaded = true`)
		c.kubectl("scale", "deployment", "web", "--replicas", "1")
		b.waitJS(`document.querySelectorAll('#list tr[data-name^="web-"]').length === 1`, "one pod left on the open list")
		if !b.evalBool(`window.notReloaded === true`) {
			t.Errorf("the page was reloaded")
		}
	})

	t.Run("every list shows", func(t *testing.T) {
		b.t = t
		keys := []string{"nodes", "namespaces", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs", "pods", "services", "ingresses", "configmaps", "events"}
		for _, key := range keys {
			b.go_("#/list/" + key)
			b.waitJS(`/^\d+ /.test(document.getElementById('count').textContent)`, key+" listed")
			if msg := b.evalString(`document.getElementById('error').textContent`); msg != "" {
				t.Errorf("%s: %s", key, msg)
			}
		}
		b.go_("#/list/nodes")
		b.waitJS(`(document.querySelector('#list tr[data-name="`+node+`"]') || {}).textContent.includes('Ready')`, "the node Ready on the nodes list")
	})

	t.Run("a viewer is refused a delete", func(t *testing.T) {
		b.t = t
		b.click("#logout")
		b.do(chromedp.WaitVisible(chromedp.ID("token"))) // back on the login page
		b.login(viewerToken)
		b.refusedPodDelete(ctx, client, "system:serviceaccount:default:dash-viewer")
	})

	// The same pages at the apiserver's own /ui/, logged in by the browser's client
	// certificate alone: its user reads nodes and (as view allows) pods, and no more.
	t.Run("a client certificate at the apiserver's /ui/", func(t *testing.T) {
		if !strings.Contains(c.log.String(), fmt.Sprintf("mizzen dashboard at https://127.0.0.1:%d/ui/", c.port)) {
			t.Errorf("the server did not print the /ui/ URL:\n%s", c.log.String())
		}
		c.kubectlStdin(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ui-node-reader}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ui-exec, namespace: default}
rules:
- {apiGroups: [""], resources: [pods/exec], verbs: [get, create]}
`, "apply", "-f", "-")
		c.kubectl("create", "rolebinding", "ui-alice-exec", "--role", "ui-exec", "--user", "ui-alice")
		c.kubectl("create", "clusterrolebinding", "ui-alice-nodes", "--clusterrole", "ui-node-reader", "--user", "ui-alice")
		c.kubectl("create", "clusterrolebinding", "ui-alice-view", "--clusterrole", "view", "--user", "ui-alice")
		base := fmt.Sprintf("https://127.0.0.1:%d/ui", c.port)
		cb := newClientCertBrowser(t, chromium, base, dataDir, "ui-alice", "ui-team")
		cb.go_("#/overview")
		cb.waitJS(`document.getElementById('user').textContent === 'ui-alice'`, "the certificate's user named on the page")
		cb.waitJS(`(document.querySelector('tr[data-component="kubelet-`+node+`"] td.ok') || {}).textContent === 'healthy'`, "the node's kubelet healthy on the overview")
		cb.screenshot("ui-overview")
		cb.refusedPodDelete(ctx, client, "ui-alice")
		// The journey, asked of the dashboard's helper at /ui/, read as the user.
		cb.waitJS(`!!document.querySelector('#journey-steps tr[data-step="created"]')`, "the pod's journey at /ui/")
		// The terminal: the page's own WebSocket to the apiserver's pods/exec, from the
		// apiserver's origin, authenticated by the certificate.
		pod := cb.evalString(`document.getElementById('object-name').textContent`)
		cb.hostnameInTerminal(pod)
	})
}

// newClientCertBrowser is a headless Chromium that presents a client certificate for
// user (in groups), issued by the cluster CA of dataDir, to base's host and port.
// Chromium reads client certificates from the NSS database in $HOME/.pki/nssdb, filled
// with pk12util; headless, it asks no one which certificate to present, so a managed
// policy, AutoSelectCertificateForUrls for exactly this origin and CA, selects it (the
// policy directory is the machine's: the file is removed when the test ends).
func newClientCertBrowser(t *testing.T, chromium, base, dataDir, user string, groups ...string) *browser {
	t.Helper()
	for _, tool := range []string{"openssl", "certutil", "pk12util"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make deps)", tool)
		}
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(dataDir, "tls"), datadir.CAName, "unused: the CA exists")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := ca.LoadOrIssueClient(dir, user, user, groups); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	nssdb := "sql:" + filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(filepath.Join(home, ".pki", "nssdb"), 0o700); err != nil {
		t.Fatal(err)
	}
	p12 := filepath.Join(dir, user+".p12")
	for _, cmd := range [][]string{
		{"openssl", "pkcs12", "-export", "-in", filepath.Join(dir, user+".crt"), "-inkey", filepath.Join(dir, user+".key"), "-name", user, "-out", p12, "-passout", "pass:"},
		{"certutil", "-N", "-d", nssdb, "--empty-password"},
		{"pk12util", "-i", p12, "-d", nssdb, "-W", ""},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(cmd, " "), err, out)
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	selector, err := json.Marshal(map[string]any{"pattern": u.Scheme + "://" + u.Host,
		"filter": map[string]any{"ISSUER": map[string]string{"CN": ca.Cert.Subject.CommonName}}})
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := json.Marshal(map[string]any{"AutoSelectCertificateForUrls": []string{string(selector)}})
	const policyDir = "/etc/chromium/policies/managed"
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(policyDir, "mizzen-e2e-"+u.Port()+".json")
	t.Cleanup(func() { _ = os.Remove(policyFile) })
	if err := os.WriteFile(policyFile, policy, 0o644); err != nil {
		t.Fatal(err)
	}
	return newBrowser(t, chromium, base, chromedp.Env("HOME="+home))
}

// refusedPodDelete opens a pod of the Deployment, deletes it as user, who may not, and
// checks that the page shows the apiserver's refusal naming user and that the pod
// stays.
func (b *browser) refusedPodDelete(ctx context.Context, client kubernetes.Interface, user string) {
	t := b.t
	t.Helper()
	pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("listing the Deployment's pods: %v", err)
	}
	pod := pods.Items[0].Name
	b.go_(fmt.Sprintf("#/obj/pods/default/%s", pod))
	b.waitJS(`(document.getElementById('object-name') || {}).textContent === '`+pod+`'`, "the pod's page, as "+user)
	b.click("#action-delete")
	b.do(chromedp.WaitVisible(chromedp.ID("dialog-ok")))
	b.click("#dialog-ok")
	b.waitJS(`(document.getElementById('error').textContent || '').includes('forbidden')`, "RBAC's refusal")
	msg := b.evalString(`document.getElementById('error').textContent`)
	if !strings.Contains(msg, `User "`+user+`" cannot delete resource "pods"`) {
		t.Errorf("refusal shown: %q, want the apiserver's message naming %s", msg, user)
	}
	if _, err := client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{}); err != nil {
		t.Errorf("the pod is gone after %s's refused delete: %v", user, err)
	}
}

// changeHostNetwork changes the host's network as a pod starting does: a veth pair named
// name0/name1 comes up and name0 gets addr; the links are removed when the test ends.
func changeHostNetwork(t *testing.T, name, addr string) {
	t.Helper()
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name+"0").Run() })
	for _, args := range [][]string{
		{"link", "add", name + "0", "type", "veth", "peer", "name", name + "1"},
		{"link", "set", name + "0", "up"},
		{"link", "set", name + "1", "up"},
		{"addr", "add", addr, "dev", name + "0"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// newTab opens another tab of b's browser, in a browser context of its own (its own
// cookies and cache, as a private window), closed when t ends.
func (b *browser) newTab(t *testing.T) *browser {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return &browser{t: t, ctx: ctx, base: b.base}
}

// loseFirstRequests makes the tab's network lose, with a failed connection, the first
// request whose URL ends in each of suffixes (see pauseRequests), and pass every other
// request on. lost
// tells the suffixes whose request was lost so far, and the first command the browser
// refused.
func (b *browser) loseFirstRequests(suffixes ...string) (lost func() ([]string, error)) {
	b.t.Helper()
	var (
		mu       sync.Mutex
		lostOnes []string
		firstErr error
	)
	paused := b.pauseRequests(suffixes...)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			mu.Lock()
			lose := ""
			for _, s := range suffixes {
				if strings.HasSuffix(ev.Request.URL, s) && !slices.Contains(lostOnes, s) {
					lose = s
					lostOnes = append(lostOnes, s)
					break
				}
			}
			mu.Unlock()
			if lose != "" {
				_, err = chromedp.Call(b.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionFailed})
			} else {
				_, err = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			}
			mu.Lock()
			if err != nil && firstErr == nil && b.ctx.Err() == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}()
	return func() ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lostOnes), firstErr
	}
}

// pauseRequests has the tab pause each request whose URL ends in one of suffixes
// (which hold no '*', '?' or '\': each ends a DevTools Fetch domain URL pattern) and
// returns them as they are paused, until the tab's context ends. The caller answers
// each: continues, fails or fulfils it.
func (b *browser) pauseRequests(suffixes ...string) iter.Seq2[fetch.EventRequestPaused, error] {
	b.t.Helper()
	var patterns []*fetch.RequestPattern
	for _, s := range suffixes {
		patterns = append(patterns, &fetch.RequestPattern{URLPattern: "*" + s})
	}
	paused := chromedp.Events(b.ctx, fetch.RequestPaused) // subscribed before any is paused
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: patterns}); err != nil {
		b.t.Fatalf("intercepting requests: %v", err)
	}
	return paused
}

// holdFirstRequest holds the tab's first request whose URL ends in suffix (see
// pauseRequests), for the caller to answer with fetch.FulfillRequest, and passes on
// every later one.
func (b *browser) holdFirstRequest(suffix string) (held <-chan fetch.RequestID) {
	b.t.Helper()
	paused := b.pauseRequests(suffix)
	ch := make(chan fetch.RequestID, 1)
	go func() {
		first := true
		for ev, err := range paused {
			if err != nil {
				return
			}
			if first {
				first = false
				ch <- ev.RequestID
				continue
			}
			_, _ = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	return ch
}

// browser is one headless Chromium tab on the dashboard.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
}

func newBrowser(t *testing.T, chromium, base string, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	// Chromium keeps its singleton socket in a directory of TMPDIR that it does not
	// remove. It gets one of its own, short: t.TempDir's names make the socket's path
	// longer than a Unix socket's 107 bytes.
	tmp, err := os.MkdirTemp("", "chromium")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		// The serving certificate is the cluster CA's, which this browser does not know.
		chromedp.IgnoreCertErrors, chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("TMPDIR="+tmp))
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser outside any step's deadline
		t.Fatalf("starting chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx, base: base}
}

func (b *browser) do(a chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, a); err != nil {
		b.t.Fatalf("%v (page: %s)", err, b.page())
	}
}

func (b *browser) click(selector string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible))
}

// go_ shows a page of the application.
func (b *browser) go_(hash string) {
	b.t.Helper()
	b.navigate(b.base + "/" + hash)
	b.appStarted()
}

// appStarted waits for the application's script to have run (it fills the navigation),
// reloading, as a user would, a page whose script load Chromium abandoned: a host link
// or address changing (another test's pod starting) fails a load in flight with
// ERR_NETWORK_CHANGED, and a page without its script stays an empty frame.
func (b *browser) appStarted() {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		if b.pollJS(`document.querySelectorAll('#nav a').length > 0`, 15*time.Second) {
			return
		}
		if attempt == 4 {
			b.t.Fatalf("the dashboard's script never ran (page: %s)", b.page())
		}
		b.t.Logf("the dashboard's script has not run after 15s (page: %s); reloading", b.page())
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		_ = chromedp.Do(ctx, chromedp.Reload())
		cancel()
	}
}

// navigate loads url. A load the browser abandoned because the host's network changed
// meanwhile (other clusters on this host add and remove links all the time) is tried
// again, as a user would reload.
func (b *browser) navigate(url string) {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		err := chromedp.Do(ctx, chromedp.Navigate(url))
		cancel()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "ERR_NETWORK_CHANGED") || attempt == 4 {
			b.t.Fatalf("loading %s: %v (page: %s)", url, err, b.page())
		}
	}
}

func (b *browser) login(token string) {
	b.t.Helper()
	for attempt := 0; ; attempt++ {
		b.navigate(b.base + "/")
		b.do(chromedp.WaitVisible(chromedp.ID("token"))) // the login page, since there is no session
		b.do(chromedp.SetValue(chromedp.ID("token"), token))
		b.click("#login-button")
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("logout")))
		cancel()
		if err == nil {
			b.appStarted()
			return
		}
		// The form's post, like any load, may be abandoned on a host network change.
		if page := b.page(); !strings.HasPrefix(page, "chrome-error:") || attempt == 4 {
			b.t.Fatalf("logging in: %v (page: %s)", err, page)
		}
	}
}

// hostnameInTerminal opens the pod's terminal, runs hostname in its shell and waits
// for the pod's name. A WebSocket Chromium closed on a host network change (see
// appStarted) is opened again with the page's Reconnect button, as a user would.
func (b *browser) hostnameInTerminal(pod string) {
	b.t.Helper()
	b.click("#action-exec")
	for attempt := 0; ; attempt++ {
		if b.pollJS(`(document.getElementById('exec-state') || {}).textContent.startsWith('connected') && document.querySelector('.xterm-rows').textContent.includes('#')`, 30*time.Second) {
			b.typeInTerminal("hostname")
			if b.pollJS(`document.querySelector('.xterm-rows').textContent.split('`+pod+`').length > 1`, 30*time.Second) {
				return
			}
		}
		// An error the page shows (the terminal could not start) no reconnecting mends.
		if msg := b.evalString(`(document.getElementById('error') || {}).textContent || ''`); attempt == 4 || msg != "" {
			b.screenshot("failed")
			b.t.Fatalf("the terminal never printed the pod's name (page: %s)", b.page())
		}
		b.t.Logf("no hostname from the terminal yet (state %q); reconnecting", b.evalString(`(document.getElementById('exec-state') || {}).textContent || ''`))
		b.click("#exec-connect")
	}
}

// typeInTerminal types a line into the terminal as a keyboard would: the text as typed
// input, then one Enter key press. (chromedp's SendKeys sends both a key-down carrying
// the text and a char event, which xterm.js takes as two key strokes.)
func (b *browser) typeInTerminal(line string) {
	b.t.Helper()
	b.do(chromedp.Focus(chromedp.CSS(".xterm-helper-textarea")))
	b.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: line}); err != nil {
			return err
		}
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
			if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// waitJS waits until the expression is true on the page.
func (b *browser) waitJS(expr, what string) {
	b.t.Helper()
	if !b.pollJS(expr, 90*time.Second) {
		b.screenshot("failed")
		b.t.Fatalf("waiting for %s (page: %s)", what, b.page())
	}
}

// pollJS says whether the expression became true on the page within d.
func (b *browser) pollJS(expr string, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => { try { return !!(`+expr+`); } catch (e) { return false; } })()`))
		if err == nil && ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (b *browser) evalString(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

func (b *browser) evalBool(expr string) bool {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *browser) evalInt(expr string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](expr))
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

// page is the location and visible text of the page, for failure messages.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 3000)`))
	return s
}

// screenshot saves a PNG of the page into $MIZZEN_DASHBOARD_SCREENSHOTS, when set, for a
// developer to look at.
func (b *browser) screenshot(name string) {
	dir := os.Getenv("MIZZEN_DASHBOARD_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
}
