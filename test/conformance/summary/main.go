// Command summary reads the junit reports of an e2e run and prints the counts (passed,
// failed, skipped), the counts by SIG, and every spec's result.
//
//	go run ./test/conformance/summary REPORT_DIR
package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

type testcase struct {
	Name    string    `xml:"name,attr"`
	Skipped *struct{} `xml:"skipped"`
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
}

// suites matches both a <testsuites> root and a single <testsuite>.
type suites struct {
	Suites []struct {
		Cases []testcase `xml:"testcase"`
	} `xml:"testsuite"`
	Cases []testcase `xml:"testcase"`
}

var sigOf = regexp.MustCompile(`\[(sig-[a-z-]+)\]`)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: summary REPORT_DIR")
		os.Exit(2)
	}
	files, _ := filepath.Glob(filepath.Join(os.Args[1], "junit*.xml"))
	var cases []testcase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var s suites
		if err := xml.Unmarshal(data, &s); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			os.Exit(1)
		}
		cases = append(cases, s.Cases...)
		for _, ts := range s.Suites {
			cases = append(cases, ts.Cases...)
		}
	}
	type count struct{ passed, failed int }
	bySIG := map[string]*count{}
	var passed, failed []string
	skipped := 0
	for _, c := range cases {
		if c.Skipped != nil {
			skipped++
			continue
		}
		if !strings.HasPrefix(c.Name, "[It]") {
			continue // the suite's own setup and report steps, not specs
		}
		sig := "other"
		if m := sigOf.FindStringSubmatch(c.Name); m != nil {
			sig = m[1]
		}
		if bySIG[sig] == nil {
			bySIG[sig] = &count{}
		}
		if c.Failure != nil || c.Error != nil {
			failed = append(failed, c.Name)
			bySIG[sig].failed++
		} else {
			passed = append(passed, c.Name)
			bySIG[sig].passed++
		}
	}
	fmt.Printf("passed %d  failed %d  skipped %d\n", len(passed), len(failed), skipped)
	sigs := make([]string, 0, len(bySIG))
	for s := range bySIG {
		sigs = append(sigs, s)
	}
	sort.Strings(sigs)
	for _, s := range sigs {
		fmt.Printf("SIG %-22s passed %3d  failed %3d\n", s, bySIG[s].passed, bySIG[s].failed)
	}
	sort.Strings(failed)
	sort.Strings(passed)
	for _, n := range failed {
		fmt.Println("FAIL", n)
	}
	for _, n := range passed {
		fmt.Println("PASS", n)
	}
}
