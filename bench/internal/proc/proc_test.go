package proc

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatus(t *testing.T) {
	in := "Name:\trevd\nVmPeak:\t 2000 kB\nVmHWM:\t  1500 kB\nVmRSS:\t  1024 kB\nRssAnon:\t   800 kB\nRssFile:\t   224 kB\nThreads:\t9\n"
	m, err := parseStatus(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 1024<<10 || m.HWM != 1500<<10 || m.Anon != 800<<10 || m.File != 224<<10 {
		t.Errorf("%+v", m)
	}
	if _, err := parseStatus(strings.NewReader("VmRSS:\t12 MB\nVmHWM:\t1 kB\n")); err == nil {
		t.Error("bad unit accepted")
	}
	if _, err := parseStatus(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("missing lines accepted")
	}
}

func TestReadMemorySelf(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS {
		t.Errorf("%+v", m)
	}
}

func TestBuildInfoModule(t *testing.T) {
	out := "/x/benchmark: go1.26.8\n\tpath\tgo.etcd.io/etcd/v3/tools/benchmark\n\tmod\tgo.etcd.io/etcd/v3\tv3.7.1\th1:abc=\n\tdep\tx\tv1\n"
	if got := buildInfoModule([]byte(out)); got != "go.etcd.io/etcd/v3@v3.7.1" {
		t.Errorf("got %q", got)
	}
}

func TestParseStat(t *testing.T) {
	// Field 2 may hold spaces and parentheses; utime=250, stime=50 ticks.
	stat := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 100 0\n"
	d, err := parseStat(stat)
	if err != nil || d != 3*time.Second {
		t.Errorf("parseStat = %v, %v; want 3s", d, err)
	}
	if _, err := parseStat("1234 (x) S 1"); err == nil {
		t.Error("short stat accepted")
	}
	if _, err := ReadCPUTime(os.Getpid()); err != nil {
		t.Error(err)
	}
}
