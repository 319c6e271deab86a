// Package profile captures a CPU profile from revd's --pprof endpoint,
// turns it into `go tool pprof -top` output and summarizes that: the top
// functions by own (flat) time, the revd functions by cumulative time, and
// the CPU time by component (Go runtime, syscalls, gRPC, Pebble, ...).
package profile

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Capture fetches a CPU profile of the given length from a net/http/pprof
// server at addr (host:port) and writes it to path.
func Capture(ctx context.Context, addr string, d time.Duration, path string) error {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs)
	body, err := get(ctx, url)
	if err != nil {
		return err
	}
	defer body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return fmt.Errorf("profile: reading %s: %w", url, err)
	}
	return f.Close()
}

// get GETs url and returns the body of a 200 answer.
func get(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("profile: GET %s: %s: %s", url, resp.Status, b)
	}
	return resp.Body, nil
}

// Top runs `go tool pprof -top` over every node of the profile (nothing
// dropped) and returns its output.
func Top(ctx context.Context, binary, profilePath string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top",
		"-nodecount=0", "-nodefraction=0", "-edgefraction=0", binary, profilePath)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		return "", fmt.Errorf("go tool pprof -top: %v\n%s", err, msg)
	}
	return string(out), nil
}

// Node is one line of -top output.
type Node struct {
	Name      string
	Flat, Cum time.Duration
}

// Parsed is -top output as data.
type Parsed struct {
	// Duration is the wall-clock length of the profile; Total the CPU time
	// sampled.
	Duration, Total time.Duration
	// Nodes in the order pprof printed them (by flat time, descending).
	Nodes []Node
}

// ParseTop reads the output of `go tool pprof -top`.
func ParseTop(out string) (*Parsed, error) {
	p := &Parsed{}
	inTable := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "Duration: "); ok {
			// "Duration: 2.01s, Total samples = 1.50s (74.63%)"
			d, tot, _ := strings.Cut(rest, ", Total samples = ")
			var err error
			if p.Duration, err = parseDur(d); err != nil {
				return nil, fmt.Errorf("profile: %q: %v", line, err)
			}
			tot, _, _ = strings.Cut(tot, " ")
			if p.Total, err = parseDur(tot); err != nil {
				return nil, fmt.Errorf("profile: %q: %v", line, err)
			}
			continue
		}
		if strings.HasPrefix(line, "flat") && strings.Contains(line, "cum%") {
			inTable = true
			continue
		}
		if !inTable || line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 {
			return nil, fmt.Errorf("profile: short line %q", line)
		}
		flat, err := parseDur(f[0])
		if err != nil {
			return nil, fmt.Errorf("profile: %q: %v", line, err)
		}
		cum, err := parseDur(f[3])
		if err != nil {
			return nil, fmt.Errorf("profile: %q: %v", line, err)
		}
		p.Nodes = append(p.Nodes, Node{Name: strings.Join(f[5:], " "), Flat: flat, Cum: cum})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !inTable {
		return nil, fmt.Errorf("profile: no table in the pprof output")
	}
	return p, nil
}

// parseDur reads pprof's durations: "0", "10ms", "1.50s", "250us", "1.2mins".
func parseDur(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if v, ok := strings.CutSuffix(s, "mins"); ok {
		f, err := strconv.ParseFloat(v, 64)
		return time.Duration(f * float64(time.Minute)), err
	}
	if v, ok := strings.CutSuffix(s, "hrs"); ok {
		f, err := strconv.ParseFloat(v, 64)
		return time.Duration(f * float64(time.Hour)), err
	}
	return time.ParseDuration(s)
}

// Component is CPU time attributed to one part of the program.
type Component struct {
	Name string
	Flat time.Duration
}

// components maps function-name prefixes to the part of the program they
// belong to, first match wins.
var components = []struct{ name, prefix string }{
	{compSyscall, "syscall."},
	{compSyscall, "internal/runtime/syscall"},
	{compSyscall, "runtime/internal/syscall"},
	{compSyscall, "internal/poll."},
	{compSyscall, "golang.org/x/sys/unix."},
	{compStack, "runtime.newproc"},
	{compStack, "runtime.gfget"},
	{compStack, "runtime.malg"},
	{compStack, "runtime.copystack"},
	{compStack, "runtime.newstack"},
	{compStack, "runtime.adjust"},
	{compStack, "runtime.(*stkframe)"},
	{compStack, "runtime.(*unwinder)"},
	{compStack, "runtime.pcvalue"},
	{compStack, "runtime.step"},
	{compStack, "runtime.findfunc"},
	{compStack, "runtime.funcspdelta"},
	{compStack, "runtime.readvarint"},
	{compStack, "runtime.morestack"},
	{compGC, "gcWriteBarrier"},
	{compGC, "runtime.gc"},
	{compGC, "runtime.mallocgc"},
	{compGC, "runtime.scanobject"},
	{compGC, "runtime.scanObjectsSmall"},
	{compGC, "runtime.tryDeferToSpanScan"},
	{compGC, "runtime.greyobject"},
	{compGC, "runtime.findObject"},
	{compGC, "runtime.markBits"},
	{compGC, "runtime.(*mspan)"},
	{compGC, "runtime.(*mheap)"},
	{compGC, "runtime.(*mcache)"},
	{compGC, "runtime.(*mcentral)"},
	{compGC, "runtime.(*gcWork)"},
	{compGC, "runtime.(*gcBits)"},
	{compGC, "runtime.memclr"},
	{compGC, "runtime.wbBuf"},
	{compGC, "runtime.bulkBarrier"},
	{compGC, "runtime.heapBits"},
	{compGC, "runtime.nextFreeFast"},
	{compSched, "runtime."},
	{compSched, "internal/runtime/"},
	{compSched, "internal/sync."},
	{compSched, "sync."},
	{compSched, "aeshash"},
	{compSched, "memeqbody"},
	{compSched, "indexbytebody"},
	{compGRPC, "google.golang.org/grpc"},
	{compGRPC, "golang.org/x/net/http"},
	{compProto, "google.golang.org/protobuf"},
	{compProto, "github.com/gogo/protobuf"},
	{compProto, "github.com/golang/protobuf"},
	{compProto, "go.etcd.io/etcd/api/v3"},
	{"Pebble (journal)", "github.com/cockroachdb/"},
	{"NATS (embedded server and client)", "github.com/nats-io/"},
	{"protoactor (actor mailboxes)", "github.com/asynkron/protoactor-go"},
	{"revd", "revd/"},
	{"hashing, compression", "hash/"},
	{"hashing, compression", "crypto/"},
	{"hashing, compression", "github.com/klauspost/"},
	{"hashing, compression", "github.com/golang/snappy"},
	{"Go standard library (other)", "context."},
	{"Go standard library (other)", "time."},
	{"Go standard library (other)", "bytes."},
	{"Go standard library (other)", "strings."},
	{"Go standard library (other)", "strconv."},
	{"Go standard library (other)", "sort."},
	{"Go standard library (other)", "slices."},
	{"Go standard library (other)", "maps."},
	{"Go standard library (other)", "fmt."},
	{"Go standard library (other)", "errors."},
	{"Go standard library (other)", "io."},
	{"Go standard library (other)", "bufio."},
	{"Go standard library (other)", "encoding/"},
	{"Go standard library (other)", "net."},
	{"Go standard library (other)", "os."},
	{"Go standard library (other)", "reflect."},
	{"Go standard library (other)", "unicode"},
	{"Go standard library (other)", "math"},
	{"Go standard library (other)", "log/"},
	{"Go standard library (other)", "internal/"},
}

// Component names used more than once.
const (
	compSyscall = "syscalls (fsync, network I/O, futex)"
	compStack   = "Go runtime: goroutine creation and stack growth"
	compGC      = "Go runtime: GC and allocation"
	compSched   = "Go runtime: scheduler, channels, maps, locks"
	compGRPC    = "gRPC and HTTP/2"
	compProto   = "protobuf"
)

// componentOf names the component of a function.
func componentOf(fn string) string {
	for _, c := range components {
		if strings.HasPrefix(fn, c.prefix) {
			return c.name
		}
	}
	return "other"
}

// ByComponent sums flat time per component, largest first.
func (p *Parsed) ByComponent() []Component {
	sums := map[string]time.Duration{}
	for _, n := range p.Nodes {
		sums[componentOf(n.Name)] += n.Flat
	}
	var out []Component
	for name, d := range sums {
		if d > 0 {
			out = append(out, Component{name, d})
		}
	}
	slices.SortFunc(out, func(a, b Component) int {
		return cmp.Or(cmp.Compare(b.Flat, a.Flat), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// TopFlat returns the n nodes with the most flat time.
func (p *Parsed) TopFlat(n int) []Node {
	nodes := slices.Clone(p.Nodes)
	slices.SortStableFunc(nodes, func(a, b Node) int { return cmp.Compare(b.Flat, a.Flat) })
	return nodes[:min(n, len(nodes))]
}

// TopCum returns the n nodes whose name starts with prefix with the most
// cumulative time.
func (p *Parsed) TopCum(prefix string, n int) []Node {
	var nodes []Node
	for _, nd := range p.Nodes {
		if strings.HasPrefix(nd.Name, prefix) {
			nodes = append(nodes, nd)
		}
	}
	slices.SortStableFunc(nodes, func(a, b Node) int { return cmp.Compare(b.Cum, a.Cum) })
	return nodes[:min(n, len(nodes))]
}

// MemStats fetches the Go runtime's memory statistics from a net/http/pprof
// server at addr: the "# Name = value" lines that /debug/pprof/heap?debug=1
// ends with (runtime.MemStats), by name.
func MemStats(ctx context.Context, addr string) (map[string]uint64, error) {
	body, err := get(ctx, fmt.Sprintf("http://%s/debug/pprof/heap?debug=1", addr))
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return ParseMemStats(body)
}

// ParseMemStats reads the "# Name = value" lines of a debug=1 heap
// profile ("# Stack = inuse / sys" gives the first number); lines whose
// value is not a number (PauseNs) are skipped.
func ParseMemStats(r io.Reader) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok || strings.ContainsAny(name, " \t") {
			continue
		}
		// "Stack = inuse / sys" and the like: the first number.
		val, _, _ = strings.Cut(val, " / ")
		if n, err := strconv.ParseUint(val, 10, 64); err == nil {
			out[name] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if _, ok := out["HeapInuse"]; !ok {
		return nil, fmt.Errorf("profile: no runtime.MemStats in the heap profile")
	}
	return out, nil
}
