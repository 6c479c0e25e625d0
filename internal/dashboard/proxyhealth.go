package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// proxyHealth is a node's service proxy's /healthz as the overview shows it. The
// dashboard asks it itself, through the apiserver's node proxy with the session's
// token, and passes on only these fields: what a node's port serves never reaches
// the dashboard's origin.
type proxyHealth struct {
	// Reachable is false when the apiserver, not the proxy, answered (a refusal, or
	// the port did not answer); Message then says why.
	Reachable   bool   `json:"reachable"`
	Healthy     bool   `json:"healthy"`
	LastUpdated string `json:"lastUpdated,omitempty"`
	Code        int    `json:"code"`
	Message     string `json:"message,omitempty"`
}

// serveProxyHealth answers GET /proxyhealth/{node}.
func (d *dashboard) serveProxyHealth(w http.ResponseWriter, r *http.Request) {
	cfg, ok := d.userConfig(r)
	if !ok {
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", "log in first")
		return
	}
	if d.settings.ProxyHealthzPort <= 0 {
		writeStatus(w, http.StatusNotFound, "NotFound", "the dashboard was given no proxy health port")
		return
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	node := r.PathValue("node")
	target := strings.TrimSuffix(cfg.Host, "/") + "/api/v1/nodes/" + url.PathEscape(node+":"+strconv.Itoa(d.settings.ProxyHealthzPort)) + "/proxy/healthz"
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		writeJSON(w, proxyHealth{Message: err.Error()})
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	writeJSON(w, proxyHealthOf(resp.StatusCode, body))
}

// proxyHealthOf reads an answer to nodes/NAME:PORT/proxy/healthz: the proxy's own
// (200 healthy, 503 stale, with upstream's lastUpdated and currentTime) or the
// apiserver's Status.
func proxyHealthOf(code int, body []byte) proxyHealth {
	var answer struct {
		Kind        string `json:"kind"`
		Message     string `json:"message"`
		LastUpdated string `json:"lastUpdated"`
		CurrentTime string `json:"currentTime"`
	}
	parsed := json.Unmarshal(body, &answer) == nil
	switch {
	case parsed && answer.Kind == "Status":
		var status metav1.Status
		_ = json.Unmarshal(body, &status)
		return proxyHealth{Code: code, Message: status.Message}
	case parsed && code == http.StatusOK:
		return proxyHealth{Reachable: true, Healthy: true, LastUpdated: answer.LastUpdated, Code: code}
	case parsed && code == http.StatusServiceUnavailable && answer.CurrentTime != "":
		return proxyHealth{Reachable: true, LastUpdated: answer.LastUpdated, Code: code, Message: "a change waits to be written"}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	return proxyHealth{Code: code, Message: fmt.Sprintf("%d: %s", code, text)}
}
