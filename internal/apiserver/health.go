package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// healthCheck is one named check of /healthz, /livez or /readyz.
type healthCheck struct {
	name  string
	check func(r *http.Request) error
}

// healthChecks are the checks of an endpoint ("healthz", "livez" or "readyz"), named as
// upstream names the same checks.
func (s *Server) healthChecks(endpoint string) []healthCheck {
	checks := []healthCheck{
		{"ping", func(*http.Request) error { return nil }},
		{"log", func(*http.Request) error { return nil }},
		{"etcd", s.checkEtcd},
	}
	if endpoint == "readyz" {
		checks = append(checks,
			healthCheck{"etcd-readiness", s.checkEtcd},
			healthCheck{"informer-sync", func(*http.Request) error {
				if !s.ready.Load() {
					return fmt.Errorf("not finished")
				}
				return nil
			}})
	}
	checks = append(checks, healthCheck{"poststarthook/generic-apiserver-start-informers", func(*http.Request) error {
		select {
		case <-s.cache.Ready():
			return nil
		default:
			return fmt.Errorf("not finished")
		}
	}})
	return checks
}

// checkEtcd reads one key's count from etcd, with a short deadline of its own.
func (s *Server) checkEtcd(r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.store.CurrentRevision(ctx); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}

// serveHealth answers /<endpoint>, /<endpoint>/<check> and their ?verbose and ?exclude=
// forms with upstream's wording: "ok", or one "[+]name ok" / "[-]name failed" line per
// check and "<endpoint> check passed|failed"; a failure is 500 with the failed lines.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request, endpoint string) {
	checks := s.healthChecks(endpoint)
	if name, ok := strings.CutPrefix(r.URL.Path, "/"+endpoint+"/"); ok && name != "" {
		for _, c := range checks {
			if c.name == name {
				if err := c.check(r); err != nil {
					writeText(w, http.StatusInternalServerError, fmt.Sprintf("internal server error: %v\n", err))
					return
				}
				writeText(w, http.StatusOK, "ok")
				return
			}
		}
		writeText(w, http.StatusNotFound, "404 page not found\n")
		return
	}
	query := r.URL.Query()
	excluded := sets.New[string]()
	for _, e := range query["exclude"] {
		excluded.Insert(strings.TrimSpace(e))
	}
	var out strings.Builder
	failed := false
	for _, c := range checks {
		if excluded.Has(c.name) {
			excluded.Delete(c.name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
			continue
		}
		if err := c.check(r); err != nil {
			failed = true
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
			s.log.Info("health check failed", "endpoint", endpoint, "check", c.name, "err", err)
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.name)
	}
	if excluded.Len() > 0 {
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(quoteAll(sets.List(excluded)), ","))
	}
	if failed {
		writeText(w, http.StatusInternalServerError, out.String()+endpoint+" check failed\n")
		return
	}
	if _, verbose := query["verbose"]; !verbose {
		writeText(w, http.StatusOK, "ok")
		return
	}
	writeText(w, http.StatusOK, out.String()+endpoint+" check passed\n")
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
