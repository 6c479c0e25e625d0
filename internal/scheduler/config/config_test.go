package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"mizzen/internal/scheduler/framework"
)

func TestLoadDefaults(t *testing.T) {
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if !*cfg.LeaderElection.LeaderElect || cfg.LeaderElection.ResourceNamespace != "kube-system" || cfg.LeaderElection.ResourceName != "kube-scheduler" ||
		cfg.LeaderElection.LeaseDuration.Duration != 15*time.Second {
		t.Errorf("leader election defaults %+v", cfg.LeaderElection)
	}
	if *cfg.PodInitialBackoffSeconds != 1 || *cfg.PodMaxBackoffSeconds != 10 || *cfg.Parallelism != 16 {
		t.Errorf("defaults: backoff %d..%d parallelism %d", *cfg.PodInitialBackoffSeconds, *cfg.PodMaxBackoffSeconds, *cfg.Parallelism)
	}
	if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName != DefaultSchedulerName {
		t.Errorf("profiles %+v", cfg.Profiles)
	}
	profiles, skipped := Resolve(cfg)
	if len(skipped) != 0 {
		t.Errorf("skipped %v", skipped)
	}
	var names []string
	for _, p := range DefaultMultiPoint() {
		names = append(names, p.Name)
	}
	if !reflect.DeepEqual(profiles[0].MultiPoint, names) {
		t.Errorf("multiPoint %v", profiles[0].MultiPoint)
	}
	if profiles[0].ScoreWeights["TaintToleration"] != 3 || profiles[0].ScoreWeights["InterPodAffinity"] != 2 {
		t.Errorf("weights %v", profiles[0].ScoreWeights)
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		check   func(t *testing.T, p []framework.ProfileConfig, skipped []string)
		wantErr string
	}{
		{
			name: "two profiles with disabled and re-weighted plugins",
			yaml: `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
- schedulerName: no-spread
  plugins:
    multiPoint:
      enabled:
      - name: NodeAffinity
        weight: 7
      disabled:
      - name: PodTopologySpread
    score:
      disabled:
      - name: "*"
      enabled:
      - name: NodeResourcesFit
        weight: 3
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
`,
			check: func(t *testing.T, p []framework.ProfileConfig, _ []string) {
				if len(p) != 2 || p[1].SchedulerName != "no-spread" {
					t.Fatalf("profiles %+v", p)
				}
				for _, n := range p[1].MultiPoint {
					if n == "PodTopologySpread" {
						t.Error("PodTopologySpread not disabled")
					}
				}
				if p[1].ScoreWeights["NodeAffinity"] != 7 || p[1].ScoreWeights["NodeResourcesFit"] != 3 {
					t.Errorf("weights %v", p[1].ScoreWeights)
				}
				if !reflect.DeepEqual(p[1].Disabled[framework.PointScore], []string{"*"}) || !reflect.DeepEqual(p[1].Enabled[framework.PointScore], []string{"NodeResourcesFit"}) {
					t.Errorf("score point: enabled %v disabled %v", p[1].Enabled[framework.PointScore], p[1].Disabled[framework.PointScore])
				}
				if !strings.Contains(string(p[1].PluginArgs["NodeResourcesFit"]), "MostAllocated") {
					t.Errorf("args %s", p[1].PluginArgs["NodeResourcesFit"])
				}
			},
		},
		{
			name: "unimplemented upstream plugins are skipped",
			yaml: `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    filter:
      enabled:
      - name: VolumeZone
`,
			check: func(t *testing.T, p []framework.ProfileConfig, skipped []string) {
				if !reflect.DeepEqual(skipped, []string{"VolumeZone"}) || len(p[0].Enabled[framework.PointFilter]) != 0 {
					t.Errorf("skipped %v, filter %v", skipped, p[0].Enabled[framework.PointFilter])
				}
			},
		},
		{name: "unknown field", yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nbogus: 1\n", wantErr: "unknown field"},
		{name: "wrong version", yaml: "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n", wantErr: "not supported"},
		{name: "duplicate profile", yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n- schedulerName: a\n", wantErr: "Duplicate value"},
		{name: "bad percentage", yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 120\n", wantErr: "not in valid range"},
		{name: "max backoff below initial", yaml: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npodInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n", wantErr: "podMaxBackoffSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, skipped := Resolve(cfg)
			tt.check(t, p, skipped)
		})
	}
}
