package apimetrics

import (
	"math"
	"testing"
)

const scrapeBefore = `# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="0.1"} 10
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="1"} 10
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="+Inf"} 10
`

const scrapeAfter = `apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="0.1"} 60
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="1"} 110
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1",le="+Inf"} 110
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1",le="0.1"} 0
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1",le="+Inf"} 4
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1",le="+Inf"} 4
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 4
`

// TestSLOs: the calls between two scrapes, their p99 as Prometheus' histogram_quantile
// computes it, and watches left out as the SLO leaves them out.
func TestSLOs(t *testing.T) {
	before, err := ParseHistograms(scrapeBefore)
	if err != nil {
		t.Fatal(err)
	}
	after, err := ParseHistograms(scrapeAfter)
	if err != nil {
		t.Fatal(err)
	}
	lines := after.Since(before).SLOs()
	if len(lines) != 2 {
		t.Fatalf("lines %+v, want POST and LIST pods", lines)
	}
	// 100 creates: 50 within 0.1 s, 50 within 1 s; the 99th is 49/50 of the way from 0.1 to 1.
	post := lines[0]
	if post.Call != (Call{"pods", "", "POST", "resource"}) || post.Count != 100 || math.Abs(post.P99-(0.1+0.9*49/50)) > 1e-9 {
		t.Errorf("worst line %+v, want POST pods with 100 calls, p99 0.982", post)
	}
	// Beyond the last finite bound: the last bound (0.1), as Prometheus says.
	if list := lines[1]; list.Call.Verb != "LIST" || list.P99 != 0.1 || list.Call.Threshold() != 30 {
		t.Errorf("second line %+v, want LIST pods p99 0.1 of 30 s", list)
	}
}

func TestParseLabels(t *testing.T) {
	got, err := parseLabels(`a="x",b="q\"uo,te",c=""`)
	if err != nil || got["a"] != "x" || got["b"] != `q"uo,te` || got["c"] != "" || len(got) != 3 {
		t.Errorf("parseLabels = %v, %v", got, err)
	}
	if _, err := parseLabels(`a="x`); err == nil {
		t.Error("an unterminated value parsed")
	}
}
