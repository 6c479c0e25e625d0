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
