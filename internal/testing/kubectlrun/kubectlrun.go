// Package kubectlrun runs the upstream kubectl inside a test's process against a test
// server, the way a user would type it, and returns what it printed.
package kubectlrun

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// exit is how a kubectl run in this process ends on an error: kubectl would exit the
// process, so Run makes it panic with this and recovers.
type exit struct{ msg string }

// Run runs kubectl with the kubeconfig and args, returning its standard output and,
// when it failed, what it reported.
func Run(kubeconfig string, args ...string) (out, failure string) {
	var stdout, stderr bytes.Buffer
	cmdutil.BehaviorOnFatal(func(msg string, code int) { panic(exit{fmt.Sprintf("exit %d: %s", code, msg)}) })
	defer cmdutil.DefaultBehaviorOnFatal()
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exit)
			if !ok {
				panic(r)
			}
			out, failure = stdout.String(), e.msg+stderr.String()
		}
	}()
	args = append([]string{"--kubeconfig", kubeconfig}, args...)
	cmd := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
		Arguments:   append([]string{"kubectl"}, args...),
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		IOStreams:   genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
	})
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return stdout.String(), err.Error() + stderr.String()
	}
	return stdout.String(), ""
}

// MustRun is Run failing the test when kubectl fails.
func MustRun(t testing.TB, kubeconfig string, args ...string) string {
	t.Helper()
	out, failure := Run(kubeconfig, args...)
	if failure != "" {
		t.Fatalf("kubectl %s: %s", strings.Join(args, " "), failure)
	}
	return out
}
