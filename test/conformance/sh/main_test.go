package main

import "testing"

func TestPlainWord(t *testing.T) {
	for s, want := range map[string]bool{
		"env": true, "printenv": true, "run-parts": true,
		"": false, "env | sort": false, "echo $HOME": false, "env;ls": false, "/bin/env": false, "a'b": false,
	} {
		if got := plainWord(s); got != want {
			t.Errorf("plainWord(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestShellNameKeepsThePathItWasRunBy(t *testing.T) {
	for arg0, want := range map[string]string{"/bin/sh": "/bin/sh", "sh": "sh", "/bin/mizzen-sh": "sh", "": "sh"} {
		if got := shellName(arg0); got != want {
			t.Errorf("shellName(%q) = %q, want %q", arg0, got, want)
		}
	}
}
