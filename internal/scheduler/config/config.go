// Package config reads a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file
// into the scheduler's own structs, applies upstream defaults, and resolves each profile
// into the plugins enabled at every extension point.
package config

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"mizzen/internal/scheduler/framework"
)

// Upstream's client rate limits, applied by the scheduler when neither the file nor a
// caller-provided rest.Config sets them (SetDefaults leaves them zero to tell).
const (
	DefaultQPS   = 50
	DefaultBurst = 100
	// DefaultContentType is upstream's clientConnection.contentType default.
	DefaultContentType = "application/vnd.kubernetes.protobuf"
)

// Group version and kind accepted in configuration files.
const (
	APIVersion = "kubescheduler.config.k8s.io/v1"
	Kind       = "KubeSchedulerConfiguration"
	// DefaultSchedulerName is the profile name pods get when they name none.
	DefaultSchedulerName = "default-scheduler"
)

// Configuration mirrors KubeSchedulerConfiguration.
type Configuration struct {
	APIVersion                string                      `json:"apiVersion,omitempty"`
	Kind                      string                      `json:"kind,omitempty"`
	Parallelism               *int32                      `json:"parallelism,omitempty"`
	LeaderElection            LeaderElectionConfiguration `json:"leaderElection"`
	ClientConnection          ClientConnection            `json:"clientConnection"`
	HealthzBindAddress        string                      `json:"healthzBindAddress,omitempty"`
	MetricsBindAddress        string                      `json:"metricsBindAddress,omitempty"`
	EnableProfiling           *bool                       `json:"enableProfiling,omitempty"`
	EnableContentionProfiling *bool                       `json:"enableContentionProfiling,omitempty"`
	PercentageOfNodesToScore  *int32                      `json:"percentageOfNodesToScore,omitempty"`
	PodInitialBackoffSeconds  *int64                      `json:"podInitialBackoffSeconds,omitempty"`
	PodMaxBackoffSeconds      *int64                      `json:"podMaxBackoffSeconds,omitempty"`
	Profiles                  []Profile                   `json:"profiles,omitempty"`
	Extenders                 []json.RawMessage           `json:"extenders,omitempty"`
	DelayCacheUntilActive     bool                        `json:"delayCacheUntilActive,omitempty"`
}

// LeaderElectionConfiguration mirrors component-base's LeaderElectionConfiguration.
type LeaderElectionConfiguration struct {
	LeaderElect       *bool           `json:"leaderElect,omitempty"`
	LeaseDuration     metav1.Duration `json:"leaseDuration,omitempty"`
	RenewDeadline     metav1.Duration `json:"renewDeadline,omitempty"`
	RetryPeriod       metav1.Duration `json:"retryPeriod,omitempty"`
	ResourceLock      string          `json:"resourceLock,omitempty"`
	ResourceName      string          `json:"resourceName,omitempty"`
	ResourceNamespace string          `json:"resourceNamespace,omitempty"`
}

// ClientConnection mirrors component-base's ClientConnectionConfiguration.
type ClientConnection struct {
	Kubeconfig         string  `json:"kubeconfig,omitempty"`
	AcceptContentTypes string  `json:"acceptContentTypes,omitempty"`
	ContentType        string  `json:"contentType,omitempty"`
	QPS                float32 `json:"qps,omitempty"`
	Burst              int32   `json:"burst,omitempty"`
}

// Profile is one scheduling profile.
type Profile struct {
	SchedulerName            string         `json:"schedulerName,omitempty"`
	PercentageOfNodesToScore *int32         `json:"percentageOfNodesToScore,omitempty"`
	Plugins                  *Plugins       `json:"plugins,omitempty"`
	PluginConfig             []PluginConfig `json:"pluginConfig,omitempty"`
}

// Plugins lists enabled and disabled plugins per extension point.
type Plugins struct {
	PreEnqueue PluginSet `json:"preEnqueue,omitempty"`
	QueueSort  PluginSet `json:"queueSort,omitempty"`
	PreFilter  PluginSet `json:"preFilter,omitempty"`
	Filter     PluginSet `json:"filter,omitempty"`
	PostFilter PluginSet `json:"postFilter,omitempty"`
	PreScore   PluginSet `json:"preScore,omitempty"`
	Score      PluginSet `json:"score,omitempty"`
	Reserve    PluginSet `json:"reserve,omitempty"`
	Permit     PluginSet `json:"permit,omitempty"`
	PreBind    PluginSet `json:"preBind,omitempty"`
	Bind       PluginSet `json:"bind,omitempty"`
	PostBind   PluginSet `json:"postBind,omitempty"`
	MultiPoint PluginSet `json:"multiPoint,omitempty"`
}

// PluginSet enables and disables plugins at one extension point.
type PluginSet struct {
	Enabled  []Plugin `json:"enabled,omitempty"`
	Disabled []Plugin `json:"disabled,omitempty"`
}

// Plugin names a plugin with an optional score weight.
type Plugin struct {
	Name   string `json:"name"`
	Weight *int32 `json:"weight,omitempty"`
}

// PluginConfig carries one plugin's args.
type PluginConfig struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// DefaultMultiPoint is upstream's default plugin set in order, with score weights,
// restricted to the plugins mizzen implements.
func DefaultMultiPoint() []Plugin {
	w := func(v int32) *int32 { return &v }
	return []Plugin{
		{Name: "SchedulingGates"},
		{Name: "PrioritySort"},
		{Name: "NodeUnschedulable"},
		{Name: "NodeName"},
		{Name: "TaintToleration", Weight: w(3)},
		{Name: "NodeAffinity", Weight: w(2)},
		{Name: "NodePorts"},
		{Name: "NodeResourcesFit", Weight: w(1)},
		{Name: "VolumeBinding"},
		{Name: "PodTopologySpread", Weight: w(2)},
		{Name: "InterPodAffinity", Weight: w(2)},
		{Name: "DefaultPreemption"},
		{Name: "NodeResourcesBalancedAllocation", Weight: w(1)},
		{Name: "ImageLocality", Weight: w(1)},
		{Name: "DefaultBinder"},
	}
}

// UnimplementedUpstreamPlugins are upstream in-tree plugins mizzen does not have;
// configurations naming them are accepted and the plugins skipped (with a warning).
var UnimplementedUpstreamPlugins = []string{
	"VolumeRestrictions", "NodeVolumeLimits", "VolumeZone", "DynamicResources",
	"EBSLimits", "GCEPDLimits", "AzureDiskLimits", "CinderLimits", "NodeDeclaredFeatures",
}

// Load reads and defaults a configuration file; an empty path yields the defaults.
func Load(path string) (*Configuration, error) {
	cfg := &Configuration{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if cfg, err = Parse(data); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	SetDefaults(cfg)
	return cfg, Validate(cfg)
}

// Parse decodes YAML or JSON strictly (unknown fields are errors, as upstream).
func Parse(data []byte) (*Configuration, error) {
	cfg := &Configuration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, err
	}
	if cfg.Kind != Kind {
		return nil, fmt.Errorf("kind %q is not %q", cfg.Kind, Kind)
	}
	if cfg.APIVersion != APIVersion {
		return nil, fmt.Errorf("apiVersion %q is not supported, use %q", cfg.APIVersion, APIVersion)
	}
	return cfg, nil
}

// SetDefaults fills unset fields as upstream's v1 defaulting does.
func SetDefaults(cfg *Configuration) {
	if cfg.APIVersion == "" {
		cfg.APIVersion, cfg.Kind = APIVersion, Kind
	}
	if cfg.Parallelism == nil {
		v := int32(16)
		cfg.Parallelism = &v
	}
	le := &cfg.LeaderElection
	if le.LeaderElect == nil {
		v := true
		le.LeaderElect = &v
	}
	if le.LeaseDuration.Duration == 0 {
		le.LeaseDuration.Duration = 15 * time.Second
	}
	if le.RenewDeadline.Duration == 0 {
		le.RenewDeadline.Duration = 10 * time.Second
	}
	if le.RetryPeriod.Duration == 0 {
		le.RetryPeriod.Duration = 2 * time.Second
	}
	if le.ResourceLock == "" {
		le.ResourceLock = "leases"
	}
	if le.ResourceName == "" {
		le.ResourceName = "kube-scheduler"
	}
	if le.ResourceNamespace == "" {
		le.ResourceNamespace = "kube-system"
	}
	if cfg.PodInitialBackoffSeconds == nil {
		v := int64(1)
		cfg.PodInitialBackoffSeconds = &v
	}
	if cfg.PodMaxBackoffSeconds == nil {
		v := int64(10)
		cfg.PodMaxBackoffSeconds = &v
	}
	if len(cfg.Profiles) == 0 {
		cfg.Profiles = []Profile{{}}
	}
	if len(cfg.Profiles) == 1 && cfg.Profiles[0].SchedulerName == "" {
		cfg.Profiles[0].SchedulerName = DefaultSchedulerName
	}
}

// Validate rejects configurations upstream rejects.
func Validate(cfg *Configuration) error {
	if p := cfg.PercentageOfNodesToScore; p != nil && (*p < 0 || *p > 100) {
		return fmt.Errorf("percentageOfNodesToScore: Invalid value: %d: not in valid range [0-100]", *p)
	}
	if *cfg.PodInitialBackoffSeconds <= 0 {
		return fmt.Errorf("podInitialBackoffSeconds: Invalid value: %d: must be greater than 0", *cfg.PodInitialBackoffSeconds)
	}
	if *cfg.PodMaxBackoffSeconds < *cfg.PodInitialBackoffSeconds {
		return fmt.Errorf("podMaxBackoffSeconds: Invalid value: %d: must be greater than or equal to PodInitialBackoffSeconds", *cfg.PodMaxBackoffSeconds)
	}
	if *cfg.Parallelism <= 0 {
		return fmt.Errorf("parallelism: Invalid value: %d: should be an integer value greater than zero", *cfg.Parallelism)
	}
	if len(cfg.Extenders) > 0 {
		return fmt.Errorf("extenders: not supported by mizzen")
	}
	names := map[string]bool{}
	for i, p := range cfg.Profiles {
		if p.SchedulerName == "" {
			return fmt.Errorf("profiles[%d].schedulerName: Required value", i)
		}
		if names[p.SchedulerName] {
			return fmt.Errorf("profiles[%d].schedulerName: Duplicate value: %q", i, p.SchedulerName)
		}
		names[p.SchedulerName] = true
		if v := p.PercentageOfNodesToScore; v != nil && (*v < 0 || *v > 100) {
			return fmt.Errorf("profiles[%d].percentageOfNodesToScore: Invalid value: %d: not in valid range [0-100]", i, *v)
		}
		seen := map[string]bool{}
		for j, pc := range p.PluginConfig {
			if seen[pc.Name] {
				return fmt.Errorf("profiles[%d].pluginConfig[%d].name: Duplicate value: %q", i, j, pc.Name)
			}
			seen[pc.Name] = true
		}
	}
	return nil
}

// Resolve turns each profile into the framework's resolved form. Plugins named in
// UnimplementedUpstreamPlugins are dropped and reported in skipped.
func Resolve(cfg *Configuration) (profiles []framework.ProfileConfig, skipped []string) {
	for _, p := range cfg.Profiles {
		pc := framework.ProfileConfig{
			SchedulerName:            p.SchedulerName,
			PercentageOfNodesToScore: p.PercentageOfNodesToScore,
			Enabled:                  map[string][]string{},
			Disabled:                 map[string][]string{},
			ScoreWeights:             map[string]int32{},
			PluginArgs:               map[string]json.RawMessage{},
		}
		plugins := p.Plugins
		if plugins == nil {
			plugins = &Plugins{}
		}
		keep := func(name string) bool {
			if slices.Contains(UnimplementedUpstreamPlugins, name) {
				if !slices.Contains(skipped, name) {
					skipped = append(skipped, name)
				}
				return false
			}
			return true
		}
		// MultiPoint: defaults minus disabled, with user entries overriding defaults in
		// place and new ones appended.
		multi := mergeSet(DefaultMultiPoint(), plugins.MultiPoint)
		for _, pl := range multi {
			if !keep(pl.Name) {
				continue
			}
			pc.MultiPoint = append(pc.MultiPoint, pl.Name)
			if pl.Weight != nil {
				pc.ScoreWeights[pl.Name] = *pl.Weight
			}
		}
		for point, set := range map[string]PluginSet{
			framework.PointPreEnqueue: plugins.PreEnqueue, framework.PointQueueSort: plugins.QueueSort,
			framework.PointPreFilter: plugins.PreFilter, framework.PointFilter: plugins.Filter,
			framework.PointPostFilter: plugins.PostFilter, framework.PointPreScore: plugins.PreScore,
			framework.PointScore: plugins.Score, framework.PointReserve: plugins.Reserve,
			framework.PointPermit: plugins.Permit, framework.PointPreBind: plugins.PreBind,
			framework.PointBind: plugins.Bind, framework.PointPostBind: plugins.PostBind,
		} {
			for _, pl := range set.Enabled {
				if !keep(pl.Name) {
					continue
				}
				pc.Enabled[point] = append(pc.Enabled[point], pl.Name)
				if point == framework.PointScore && pl.Weight != nil {
					pc.ScoreWeights[pl.Name] = *pl.Weight
				}
			}
			for _, pl := range set.Disabled {
				pc.Disabled[point] = append(pc.Disabled[point], pl.Name)
			}
		}
		for _, arg := range p.PluginConfig {
			pc.PluginArgs[arg.Name] = arg.Args
		}
		profiles = append(profiles, pc)
	}
	return profiles, skipped
}

func mergeSet(defaults []Plugin, custom PluginSet) []Plugin {
	disabledAll := false
	disabled := map[string]bool{}
	for _, d := range custom.Disabled {
		if d.Name == "*" {
			disabledAll = true
		}
		disabled[d.Name] = true
	}
	customByName := map[string]Plugin{}
	for _, e := range custom.Enabled {
		customByName[e.Name] = e
	}
	var out []Plugin
	used := map[string]bool{}
	if !disabledAll {
		for _, d := range defaults {
			if disabled[d.Name] {
				continue
			}
			if c, ok := customByName[d.Name]; ok {
				d = c
				used[d.Name] = true
			}
			out = append(out, d)
		}
	}
	for _, e := range custom.Enabled {
		if !used[e.Name] {
			out = append(out, e)
		}
	}
	return out
}
