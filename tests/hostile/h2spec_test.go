package hostile

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// TestH2spec runs h2spec, the HTTP/2 conformance tester (its 145 cases,
// generic and RFC 7540's), against revd and etcd 3.7.3 side by side, both
// with --max-concurrent-streams=100 (with etcd's default of 2^32-1,
// h2spec's case 5.1.2 opens streams without end against either), and
// requires revd to pass every case etcd passes. Both serve gRPC with
// grpc-go behind a connection sniffer (etcd's cmux, revd's
// gateway/httpapi.Split), and fail the same cases: grpc-go's answers
// where RFC 7540 wants a connection error, say. A case that differs is run
// again on both, so that a loaded machine's timeout does not count as a
// difference; only one that fails on revd each time while etcd passes does.
// Both must answer a Range afterwards.
func TestH2spec(t *testing.T) {
	h2spec := testutil.H2specBin(t)
	args := []string{"--max-concurrent-streams=100"}
	servers := map[string]*testutil.Proc{
		"revd": testutil.Start(t, "revd", testutil.Options{ExtraArgs: args}),
		"etcd": testutil.Start(t, "etcd", testutil.Options{ExtraArgs: args}),
	}
	dir := t.TempDir()
	results := runH2specBoth(t, h2spec, dir, servers, nil)
	for kind, r := range results {
		t.Logf("%s: %s", kind, r.summary())
	}
	differ := results["etcd"].passedNotBy(results["revd"])
	for try := 0; len(differ) > 0 && try < 2; try++ {
		t.Logf("run again on both: %s", strings.Join(differ, " "))
		// By section: a report numbers the cases of a section it ran,
		// not their place in the whole section.
		var sections []string
		for _, id := range differ {
			sections = append(sections, id[:strings.LastIndexByte(id, '/')])
		}
		again := runH2specBoth(t, h2spec, dir, servers, slices.Compact(sections))
		still := again["etcd"].passedNotBy(again["revd"])
		differ = slices.DeleteFunc(differ, func(id string) bool { return !slices.Contains(still, id) })
	}
	for _, id := range differ {
		t.Errorf("h2spec %s (%s): etcd passes, revd fails: %s", id, results["revd"][id].name, results["revd"][id].detail)
	}
	if len(results["revd"]) != len(results["etcd"]) || len(results["revd"]) < 100 {
		t.Errorf("h2spec ran %d cases on revd, %d on etcd", len(results["revd"]), len(results["etcd"]))
	}
	for kind, p := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_, err := p.Dial(t).KV.Range(ctx, &pb.RangeRequest{Key: []byte("k")})
		cancel()
		if err != nil {
			t.Errorf("%s after h2spec: Range: %v", kind, err)
		}
	}
}

// h2specCase is one case's outcome.
type h2specCase struct {
	name   string
	result string // "passed", "failed" or "skipped"
	detail string // what h2spec expected and got, for a failure
}

// h2specResults are a run's outcomes by case id, "http2/5.1/2": the
// section, then the case's number in it, as h2spec prints them.
type h2specResults map[string]h2specCase

func (r h2specResults) summary() string {
	n := map[string]int{}
	for _, c := range r {
		n[c.result]++
	}
	return fmt.Sprintf("%d cases, %d passed, %d skipped, %d failed", len(r), n["passed"], n["skipped"], n["failed"])
}

// passedNotBy lists, sorted, the cases r passed and other did not.
func (r h2specResults) passedNotBy(other h2specResults) []string {
	var ids []string
	for id, c := range r {
		if c.result == "passed" && other[id].result != "passed" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// runH2specBoth runs h2spec on every server at once (only the sections
// given, "http2/5.1", if any) and returns each one's results.
func runH2specBoth(t *testing.T, h2spec, dir string, servers map[string]*testutil.Proc, sections []string) map[string]h2specResults {
	t.Helper()
	var mu sync.Mutex
	out := map[string]h2specResults{}
	var wg sync.WaitGroup
	for kind, p := range servers {
		wg.Go(func() {
			r, err := runH2spec(h2spec, filepath.Join(dir, kind+".xml"), p.Endpoint, sections)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("h2spec against %s: %v", kind, err)
			}
			out[kind] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// runH2spec runs h2spec against endpoint (host:port, h2c) and reads its
// JUnit report.
func runH2spec(h2spec, report, endpoint string, sections []string) (h2specResults, error) {
	host, port, _ := strings.Cut(endpoint, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"-h", host, "-p", port, "-o", "2", "-j", report}, sections...)
	cmd := exec.CommandContext(ctx, h2spec, args...)
	text, err := cmd.CombinedOutput()
	// h2spec exits 1 when a case fails, which some do on etcd too.
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		return nil, fmt.Errorf("%v\n%s", err, text)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		return nil, fmt.Errorf("no report: %v\n%s", err, text)
	}
	var doc struct {
		Suites []struct {
			Package string `xml:"package,attr"`
			Cases   []struct {
				Name    string    `xml:"classname,attr"`
				Failure *xmlInner `xml:"failure"`
				Error   *xmlInner `xml:"error"`
				Skipped *xmlInner `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("report %s: %v", report, err)
	}
	r := h2specResults{}
	for _, s := range doc.Suites {
		for i, c := range s.Cases {
			id := fmt.Sprintf("%s/%d", s.Package, i+1)
			hc := h2specCase{name: c.Name, result: "passed"}
			switch {
			case c.Skipped != nil:
				hc.result = "skipped"
			case c.Failure != nil:
				hc.result, hc.detail = "failed", c.Failure.Content
			case c.Error != nil:
				hc.result, hc.detail = "failed", c.Error.Content
			}
			r[id] = hc
		}
	}
	return r, nil
}

type xmlInner struct {
	Content string `xml:",innerxml"`
}
