package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestFailoverTime(t *testing.T) {
	ok := func(ms int) Failover { return Failover{Status: OK, Time: time.Duration(ms) * time.Millisecond} }
	rounds := []FailoverRound{
		{Etcd: ok(1500), Revd: ok(1200)},
		{Etcd: ok(1100), Revd: ok(2000)},
		{Etcd: ok(1900), Revd: ok(1300)},
		{Etcd: ok(1200)},
	}
	if v := FailoverTime(rounds, "etcd"); v.Status != OK || v.V != 1.2 {
		t.Errorf("etcd: %+v, want the lower middle of four, 1.2 s", v)
	}
	if v := FailoverTime(rounds, "revd"); v.Status != OK || v.V != 1.3 {
		t.Errorf("revd: %+v, want the median of three measured, 1.3 s", v)
	}
	rounds[1].Revd = Failover{Status: Failed, Err: "no write acknowledged"}
	if v := FailoverTime(rounds, "revd"); v.Status != Failed || v.Err != "no write acknowledged" {
		t.Errorf("a failed round: %+v, want the failure", v)
	}
	if v := FailoverTime(nil, "etcd"); v.Status != NotRun {
		t.Errorf("no round: %+v", v)
	}
}

// clusterFixture is a suite of 3-member clusters with failover rounds.
func clusterFixture() *Suite {
	s := fixture()
	s.Members = 3
	s.FailoverInterval, s.FailoverTimeout = 5*time.Millisecond, 10*time.Second
	s.Failover = []FailoverRound{
		{Etcd: Failover{Status: OK, Killed: "m1", Elected: "m3", Time: 1500 * time.Millisecond, LeaderAfter: 1400 * time.Millisecond, Begun: 300,
			Errors: map[string]int{"Unavailable: connection refused": 100, "Unknown: etcdserver: no leader": 20}},
			Revd: Failover{Status: OK, Killed: "m2", Elected: "m1", Time: 1200 * time.Millisecond, Begun: 240,
				Errors: map[string]int{"Unavailable: connection refused": 80}}},
		{Etcd: Failover{Status: OK, Killed: "m3", Time: 1100 * time.Millisecond, Begun: 220},
			Revd: Failover{Status: Failed, Killed: "m1", Err: "no write begun after the kill of m1 was acknowledged"}},
	}
	return s
}

func TestMarkdownCluster(t *testing.T) {
	var b bytes.Buffer
	s := clusterFixture()
	if err := Markdown(&b, s, Charts(s)); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"# 3-member revd vs 3-member etcd 3.7.3: benchmark report",
		"Each server ran as a cluster of 3 members on this machine (all 6 processes share its 2 cores",
		"Both clusters were started fresh",
		"the 3 members' processes together",
		"## Failover: the leader killed under writes",
		"a put every 5.00 ms through all 3 members in turn (each with a 10.0 s deadline",
		"| 1 | 1.50 s | 1.40 s | m1 → m3 | 300, 120 | 1.20 s | — | m2 → m1 | 240, 80 |",
		"| 2 | 1.10 s | — | m3 → ? | 220, 0 | failed: no write begun after the kill of m1 was acknowledged | — | m1 → ? | — |",
		"| median | 1.10 s |  |  |  | failed |  |  |  |",
		"on etcd (all rounds): 100× `Unavailable: connection refused`, 20× `Unknown: etcdserver: no leader`.",
		"on revd (all rounds): 80× `Unavailable: connection refused`.",
		"**VmRSS / VmHWM after the gRPC workloads, per member**",
		"**linearizable range on a follower**",
		"**failover time**",
		"`ENDPOINTS` is every member's address",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, not := range []string{"# revd vs etcd 3.7.3", "Both servers were started fresh", "`ENDPOINT` is the server's address", "**VmRSS / VmHWM after the gRPC workloads**:"} {
		if strings.Contains(got, not) {
			t.Errorf("a cluster's report has %q", not)
		}
	}
	// One server of each kind: no cluster section.
	b.Reset()
	if err := Markdown(&b, fixture(), nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Failover") || strings.Contains(b.String(), "member") {
		t.Error("a one-member report mentions failover or members")
	}
}
