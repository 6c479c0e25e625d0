package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/apiserver/flowcontrol"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/testing/apiserver"
)

// Every response names, by UID, the FlowSchema and priority level its request got:
// the admin's are exempt, another user's fall to global-default, and a schema made
// for a user takes that user's requests once its level exists; until then it says it
// dangles.
func TestPriorityAndFairnessClassification(t *testing.T) {
	srv := apiserver.StartWithOptions(t, nil)
	admin := srv.AdminConfig
	client := kubernetes.NewForConfigOrDie(admin)
	ctx := context.Background()
	uidOf := func(kind, name string) string {
		t.Helper()
		var uid string
		eventually(t, kind+" "+name, func() error {
			var err error
			if kind == "flowschema" {
				fs, e := client.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
				if e == nil {
					uid = string(fs.UID)
				}
				err = e
			} else {
				pl, e := client.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{})
				if e == nil {
					uid = string(pl.UID)
				}
				err = e
			}
			return err
		})
		return uid
	}
	headersOf := func(cfg *rest.Config) (string, string) {
		t.Helper()
		_, _, h := rawRequest(t, cfg, "GET", "/api/v1/namespaces/default/configmaps", "", nil)
		return h.Get(flowcontrol.HeaderFlowSchemaUID), h.Get(flowcontrol.HeaderPriorityLevelUID)
	}
	eventually(t, "the admin's request exempt", func() error {
		fs, pl := headersOf(admin)
		if fs != uidOf("flowschema", "exempt") || pl != uidOf("level", "exempt") {
			return fmt.Errorf("headers %q %q", fs, pl)
		}
		return nil
	})
	robotCfg, _ := userClient(t, srv, "robot")
	if fs, pl := headersOf(robotCfg); fs != uidOf("flowschema", "global-default") || pl != uidOf("level", "global-default") {
		t.Errorf("robot's request: headers %q %q, want global-default's", fs, pl)
	}

	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "robots"}, Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "robots"},
		MatchingPrecedence:         500,
		DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "robot"}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}}},
		}},
	}}
	if _, err := client.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDangling := func(status flowcontrolv1.ConditionStatus, reason string) {
		t.Helper()
		eventually(t, "robots' Dangling condition "+string(status), func() error {
			got, err := client.FlowcontrolV1().FlowSchemas().Get(ctx, "robots", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling && c.Status == status && c.Reason == reason &&
					strings.Contains(c.Message, `PriorityLevelConfiguration object named "robots"`) {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		})
	}
	waitDangling(flowcontrolv1.ConditionTrue, "NotFound")
	if got, _ := headersOf(robotCfg); got != uidOf("flowschema", "global-default") {
		t.Errorf("a dangling schema took robot's request (%q)", got)
	}

	pl := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "robots"}, Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr[int32](10),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}},
	}}
	if _, err := client.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, pl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDangling(flowcontrolv1.ConditionFalse, "Found")
	// What upstream's e2e test waits for besides: the level's seats on /metrics.
	eventually(t, "robots' seats on /metrics", func() error {
		_, metrics, _ := rawRequest(t, admin, "GET", "/metrics", "", nil)
		if !strings.Contains(string(metrics), `apiserver_flowcontrol_nominal_limit_seats{priority_level="robots"}`) {
			return fmt.Errorf("no apiserver_flowcontrol_nominal_limit_seats for robots")
		}
		return nil
	})
	eventually(t, "robot's request in its own schema", func() error {
		if fs, pl := headersOf(robotCfg); fs != uidOf("flowschema", "robots") || pl != uidOf("level", "robots") {
			return fmt.Errorf("headers %q %q", fs, pl)
		}
		return nil
	})
}

// With one seat per level, a burst from one user into a level that does not queue is
// partly refused with 429, a Status and Retry-After, and counted on /metrics; the
// admin's requests, exempt, never are.
func TestPriorityAndFairnessRejectsBeyondTheSeats(t *testing.T) {
	srv := apiserver.StartWithOptions(t, func(o *core.Options) {
		o.MaxRequestsInflight, o.MaxMutatingRequestsInflight = 1, 0
	})
	admin := srv.AdminConfig
	client := kubernetes.NewForConfigOrDie(admin)
	ctx := context.Background()
	pl := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "burst"}, Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr[int32](1),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}},
	}}
	if _, err := client.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, pl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "burst"}, Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "burst"},
		MatchingPrecedence:         500,
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "burster"}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true}},
		}},
	}}
	if _, err := client.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	burster, adminClient, configMaps := burstClients(t, srv)
	refused := refusedInBurst(t, burster, configMaps, http.StatusForbidden, http.StatusOK)
	if !strings.Contains(refused.body, "Too many requests, please try again later.") {
		t.Errorf("refusal: body %s", refused.body)
	}
	allServed(t, adminClient, configMaps, "an exempt request")
	_, metrics, _ := rawRequest(t, admin, "GET", "/metrics", "", nil)
	if !strings.Contains(string(metrics), `apiserver_flowcontrol_rejected_requests_total{flow_schema="burst",priority_level="burst",reason="concurrency-limit"}`) {
		t.Error("/metrics does not count the refusals")
	}
	if !strings.Contains(string(metrics), `apiserver_request_sli_duration_seconds_bucket{component="apiserver"`) {
		t.Error("/metrics has no apiserver_request_sli_duration_seconds")
	}
}

// answer is what a client saw of one request.
type answer struct {
	code       int
	retryAfter string
	body       string
}

// burstClients are HTTP clients of the user "burster", without client-side rate
// limits, and of the admin (system:masters), and the URL of the default namespace's
// ConfigMaps they send bursts of GETs to.
func burstClients(t *testing.T, srv *apiserver.Server) (burster, admin *http.Client, configMaps string) {
	t.Helper()
	cfg, _ := userClient(t, srv, "burster")
	cfg.QPS, cfg.Burst = -1, 0
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	adminTransport, err := rest.TransportFor(srv.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: transport}, &http.Client{Transport: adminTransport}, cfg.Host + "/api/v1/namespaces/default/configmaps"
}

// refusedInBurst sends bursts of 100 GETs of url until one is refused, and returns
// that refusal after checking it is a 429 Status with a Retry-After. Any answer but
// 429 and served (the codes a request let through gets) fails the test.
func refusedInBurst(t *testing.T, c *http.Client, url string, served ...int) answer {
	t.Helper()
	var refused *answer
	eventually(t, "a request of a burst refused", func() error {
		for _, a := range burst(c, url, 100) {
			switch {
			case a.code == http.StatusTooManyRequests:
				refused = &a
			case slices.Contains(served, a.code):
			default:
				return fmt.Errorf("unexpected answer %d %s", a.code, a.body)
			}
		}
		if refused == nil {
			return fmt.Errorf("100 requests at once, none refused")
		}
		return nil
	})
	// Retry-After grows while a priority level keeps refusing (up to 32 s); the
	// max-inflight limits always ask for 1 s.
	if n, err := strconv.Atoi(refused.retryAfter); err != nil || n < 1 || n > 32 || !strings.Contains(refused.body, `"reason":"TooManyRequests"`) {
		t.Errorf("refusal: Retry-After %q, body %s", refused.retryAfter, refused.body)
	}
	return *refused
}

// allServed sends a burst of 100 GETs of url and fails the test for each not
// answered 200; who names the client in the failure.
func allServed(t *testing.T, c *http.Client, url, who string) {
	t.Helper()
	for _, a := range burst(c, url, 100) {
		if a.code != http.StatusOK {
			t.Errorf("%s answered %d: %s", who, a.code, a.body)
		}
	}
}

// burst sends n GETs of url at once and returns their answers (zero for a request
// that failed in the client).
func burst(c *http.Client, url string, n int) []answer {
	var wg sync.WaitGroup
	answers := make([]answer, n)
	for i := range n {
		wg.Go(func() {
			resp, err := c.Get(url)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			answers[i] = answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(body)}
		})
	}
	wg.Wait()
	return answers
}

// TestMaxInflightWithoutPriorityAndFairness: with priority and fairness off, the
// server serves at most --max-requests-inflight reads at once, as upstream's: a burst
// beyond it gets 429s with Retry-After, counted on /metrics; system:masters is served
// beyond the limit. Of priority and fairness's series only what upstream's
// max-in-flight filter feeds is served: read_vs_write_current_requests' executing phase.
func TestMaxInflightWithoutPriorityAndFairness(t *testing.T) {
	srv := apiserver.StartWithOptions(t, func(o *core.Options) {
		o.DisablePriorityAndFairness = true
		o.MaxRequestsInflight, o.MaxMutatingRequestsInflight = 1, 1
	})
	burster, adminClient, configMaps := burstClients(t, srv)
	refusedInBurst(t, burster, configMaps, http.StatusForbidden) // served: the burster may not list ConfigMaps
	allServed(t, adminClient, configMaps, "system:masters")
	_, metrics, _ := rawRequest(t, srv.AdminConfig, "GET", "/metrics", "", nil)
	for _, want := range []string{
		`apiserver_current_inflight_requests{request_kind="readOnly"}`,
		`apiserver_flowcontrol_read_vs_write_current_requests_count{phase="executing",request_kind="readOnly"}`,
		`apiserver_flowcontrol_read_vs_write_current_requests_count{phase="executing",request_kind="mutating"}`,
		`apiserver_request_total{code="429",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"}`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	for line := range strings.Lines(string(metrics)) {
		readVsWrite := strings.HasPrefix(line, "apiserver_flowcontrol_read_vs_write_current_requests")
		if strings.HasPrefix(line, "apiserver_flowcontrol_") && (!readVsWrite || strings.Contains(line, `phase="waiting"`)) {
			t.Errorf("/metrics has %s with priority and fairness off", strings.TrimSpace(line))
		}
	}
}
