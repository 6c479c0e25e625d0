// Package version says which build of mizzen is running. A release build stamps upstream's
// version variables (k8s.io/component-base/version, read by kubectl and the servers, and
// k8s.io/client-go/pkg/version, read for user agents) with -ldflags -X, as upstream's
// release build does; see the Makefile. A binary built without them (go build, go run)
// would carry upstream's unexpanded placeholder "v0.0.0-master+$Format:%H$", which kubectl
// version cannot parse, so this package fills the unstamped ones from the Go build's own
// VCS information before main runs.
package version

import (
	"runtime/debug"
	"strings"
	_ "unsafe" // go:linkname

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	_ "k8s.io/client-go/pkg/version"
	componentversion "k8s.io/component-base/version"
)

// Kubernetes is the upstream release whose API mizzen serves.
const Kubernetes = "v1.37.2"

// Default is the version of a build nobody stamped: the upstream release, marked as mizzen's.
const Default = Kubernetes + "+mizzen"

// unstamped is upstream's placeholder for a build without -ldflags.
const unstamped = "v0.0.0-master+$Format:%H$"

// The variables -ldflags -X sets; linked so an unstamped build can still fill them.
var (
	//go:linkname cbGitVersion k8s.io/component-base/version.gitVersion
	cbGitVersion string
	//go:linkname cbGitMajor k8s.io/component-base/version.gitMajor
	cbGitMajor string
	//go:linkname cbGitMinor k8s.io/component-base/version.gitMinor
	cbGitMinor string
	//go:linkname cbGitCommit k8s.io/component-base/version.gitCommit
	cbGitCommit string
	//go:linkname cbGitTreeState k8s.io/component-base/version.gitTreeState
	cbGitTreeState string
	//go:linkname cbBuildDate k8s.io/component-base/version.buildDate
	cbBuildDate string

	//go:linkname cgGitVersion k8s.io/client-go/pkg/version.gitVersion
	cgGitVersion string
	//go:linkname cgGitMajor k8s.io/client-go/pkg/version.gitMajor
	cgGitMajor string
	//go:linkname cgGitMinor k8s.io/client-go/pkg/version.gitMinor
	cgGitMinor string
	//go:linkname cgGitCommit k8s.io/client-go/pkg/version.gitCommit
	cgGitCommit string
	//go:linkname cgGitTreeState k8s.io/client-go/pkg/version.gitTreeState
	cgGitTreeState string
	//go:linkname cgBuildDate k8s.io/client-go/pkg/version.buildDate
	cgBuildDate string
)

func init() {
	commit, date, state := vcs()
	fill := func(gitVersion, major, minor, gitCommit, treeState, buildDate *string) {
		if *gitVersion != unstamped && *gitVersion != "" {
			return
		}
		*gitVersion, *major, *minor = Default, "1", "37"
		*gitCommit, *treeState = commit, state
		if date != "" {
			*buildDate = date
		}
	}
	if cbGitVersion == unstamped || cbGitVersion == "" {
		fill(&cbGitVersion, &cbGitMajor, &cbGitMinor, &cbGitCommit, &cbGitTreeState, &cbBuildDate)
		// component-base copied gitVersion at its own init; this is its public way to replace it.
		_ = componentversion.SetDynamicVersion(cbGitVersion)
	}
	fill(&cgGitVersion, &cgGitMajor, &cgGitMinor, &cgGitCommit, &cgGitTreeState, &cgBuildDate)
}

// vcs returns the commit, its time and the tree state Go recorded in the binary, or "" when
// it recorded none (a build outside a git checkout, or with -buildvcs=false).
func vcs() (commit, date, state string) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "", ""
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			date = s.Value
		case "vcs.modified":
			state = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
		}
	}
	return commit, date, state
}

// Get is this build's version, as /version and `kubectl version` report it.
func Get() apimachineryversion.Info {
	return componentversion.Get()
}

// GitVersion is this build's semantic version, e.g. v1.37.2+mizzen.
func GitVersion() string { return strings.TrimSpace(Get().GitVersion) }

// LDFlags are the -ldflags -X settings that stamp a build as upstream's release build does:
// the same variables in k8s.io/component-base/version and k8s.io/client-go/pkg/version. The
// Makefile writes the same list; test harnesses that build the binary call this.
func LDFlags(gitCommit, treeState, buildDate string) string {
	var b strings.Builder
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, kv := range [][2]string{{"gitVersion", Default}, {"gitMajor", "1"}, {"gitMinor", "37"},
			{"gitCommit", gitCommit}, {"gitTreeState", treeState}, {"buildDate", buildDate}} {
			b.WriteString(" -X " + pkg + "." + kv[0] + "=" + kv[1])
		}
	}
	return strings.TrimSpace(b.String())
}
