package profile

import (
	"os"
	"strings"
	"testing"
	"time"
)

func parseFixture(t *testing.T) *Parsed {
	t.Helper()
	b, err := os.ReadFile("testdata/top.txt")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseTop(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseTop(t *testing.T) {
	p := parseFixture(t)
	if p.Duration != time.Second || p.Total != 910*time.Millisecond {
		t.Errorf("duration %v total %v", p.Duration, p.Total)
	}
	if len(p.Nodes) != 52 {
		t.Errorf("%d nodes, want 52", len(p.Nodes))
	}
	first := p.Nodes[0]
	if first.Name != "internal/runtime/syscall/linux.Syscall6" || first.Flat != 170*time.Millisecond || first.Cum != 170*time.Millisecond {
		t.Errorf("first node %+v", first)
	}
	for _, n := range p.Nodes {
		if n.Name == "internal/sync.(*Mutex).Lock (inline)" {
			return
		}
	}
	t.Errorf("a name with (inline) was not kept whole")
}

func TestTopCumAndFlat(t *testing.T) {
	p := parseFixture(t)
	revd := p.TopCum("revd/", 3)
	if len(revd) != 3 || revd[0].Name != "revd/actors/sequencer.(*writer).run" || revd[0].Cum != 70*time.Millisecond {
		t.Errorf("TopCum: %+v", revd)
	}
	flat := p.TopFlat(2)
	if len(flat) != 2 || flat[0].Flat < flat[1].Flat {
		t.Errorf("TopFlat: %+v", flat)
	}
}

func TestByComponent(t *testing.T) {
	p := parseFixture(t)
	comps := p.ByComponent()
	var sum time.Duration
	got := map[string]time.Duration{}
	for i, c := range comps {
		sum += c.Flat
		got[c.Name] = c.Flat
		if c.Flat <= 0 {
			t.Errorf("empty component %q listed", c.Name)
		}
		if i > 0 && comps[i-1].Flat < c.Flat {
			t.Errorf("not sorted: %v", comps)
		}
	}
	var flat time.Duration
	for _, n := range p.Nodes {
		flat += n.Flat
	}
	if sum != flat {
		t.Errorf("components sum to %v, nodes to %v", sum, flat)
	}
	for name, want := range map[string]time.Duration{
		compSyscall:                    180 * time.Millisecond, // Syscall6, internal/poll.(*FD).writeUnlock
		"revd":                         10 * time.Millisecond,
		"protoactor (actor mailboxes)": 20 * time.Millisecond,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, comps)
		}
	}
}

func TestComponentOf(t *testing.T) {
	for fn, want := range map[string]string{
		"syscall.Syscall6":    compSyscall,
		"runtime.mallocgc":    compGC,
		"runtime.adjustframe": compStack,
		"runtime.chansend":    compSched,
		"google.golang.org/grpc.(*Server).handleStream": compGRPC,
		"github.com/cockroachdb/pebble/v2.(*DB).Apply":  "Pebble (journal)",
		"revd/actors/sequencer.(*writer).run":           "revd",
		"main.main":                                     "other",
	} {
		if got := componentOf(fn); got != want {
			t.Errorf("componentOf(%q) = %q, want %q", fn, got, want)
		}
	}
}

func TestParseDur(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0": 0, "10ms": 10 * time.Millisecond, "1.50s": 1500 * time.Millisecond,
		"250us": 250 * time.Microsecond, "1.5mins": 90 * time.Second,
	} {
		got, err := parseDur(in)
		if err != nil || got != want {
			t.Errorf("parseDur(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseTop("no table here"); err == nil {
		t.Error("ParseTop accepted text without a table")
	}
}

func TestParseMemStats(t *testing.T) {
	const heap = `heap profile: 3: 1024 [10: 4096] @ heap/1048576
1: 512 [1: 512] @ 0x4a1 0x4b2
#	0x4a1	main.f+0x1	/x.go:1

# runtime.MemStats
# Alloc = 1234
# Sys = 9999
# HeapInuse = 4096
# HeapIdle = 8192
# HeapReleased = 4096
# Stack = 65536 / 65536
# PauseNs = [0 0 0]
# NumGC = 3
# DebugGC = false
`
	m, err := ParseMemStats(strings.NewReader(heap))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"Alloc": 1234, "Sys": 9999, "HeapInuse": 4096, "HeapIdle": 8192, "HeapReleased": 4096, "Stack": 65536, "NumGC": 3}
	if len(m) != len(want) {
		t.Errorf("got %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %d, want %d", k, m[k], v)
		}
	}
	if _, err := ParseMemStats(strings.NewReader("heap profile: 0: 0 [0: 0] @ heap/1\n")); err == nil {
		t.Error("a profile without MemStats parsed")
	}
}
