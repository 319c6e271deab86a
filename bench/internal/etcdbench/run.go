// Package etcdbench runs etcd's own benchmark tool
// (go.etcd.io/etcd/v3/tools/benchmark, built by the bench/tools module) and
// parses what it prints.
//
// The tool prints its summaries on standard output and, on standard error,
// a progress bar (only at the end when stderr is not a terminal) and gRPC's
// logs. A command whose server answers Unimplemented either counts the
// failures in its error distribution (put, range, txn-*) or panics
// (lease-keepalive's Grant): Unimplemented recognizes both.
package etcdbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"revd/bench/internal/stats"
)

// Run is one invocation of the tool.
type Run struct {
	// Endpoints are the servers' gRPC addresses, host:port: one server's,
	// or a cluster's members' (the tool's clients spread over them).
	Endpoints []string
	// Clients and Conns are the tool's --clients and --conns.
	Clients, Conns int
	// Command is the subcommand and its own flags and arguments, e.g.
	// {"put", "--key-size=8", "--val-size=256", "--total=10000"}.
	Command []string
}

// Args returns the tool's command line (without the binary).
func (r Run) Args() []string {
	args := []string{
		"--endpoints=" + strings.Join(r.Endpoints, ","),
		"--clients=" + strconv.Itoa(r.Clients),
		"--conns=" + strconv.Itoa(r.Conns),
		"--precise",
	}
	return append(args, r.Command...)
}

// Result is the outcome of a Run.
type Result struct {
	// Args is the command line that ran (without the binary).
	Args []string
	// Stdout is everything the tool printed there; StderrTail the end of
	// its standard error.
	Stdout, StderrTail string
	// Elapsed is the wall-clock time of the process; CPU its user and
	// system time (the load generator's own cost).
	Elapsed, CPU time.Duration
	// Summaries are the parsed sections (see Parse); nil if Err is set.
	Summaries map[string]*stats.Summary
	// Unimplemented is true if the server answered Unimplemented.
	Unimplemented bool
	// Err is set if the tool failed (exit status, timeout, no parsable
	// output) and the server did not answer Unimplemented.
	Err error
}

// Tool runs the benchmark binary at Bin.
type Tool struct {
	Bin string
}

// Run runs r until it ends or ctx is done (then the tool is killed and
// Result.Err says so).
func (t Tool) Run(ctx context.Context, r Run) Result {
	res := Result{Args: r.Args()}
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 64 << 10}
	cmd := exec.CommandContext(ctx, t.Bin, res.Args...)
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	res.Elapsed = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	res.Stdout, res.StderrTail = stdout.String(), stderr.String()
	if Unimplemented(res.Stdout, res.StderrTail) {
		res.Unimplemented = true
		return res
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		res.Err = fmt.Errorf("benchmark %s: stopped after %v: %w", r.Command[0], res.Elapsed.Round(time.Millisecond), ctxErr)
		return res
	}
	if err != nil {
		res.Err = fmt.Errorf("benchmark %s: %v\n%s", r.Command[0], err, lastLines(res.StderrTail, 15))
		return res
	}
	res.Summaries, res.Err = Parse(res.Stdout)
	return res
}

// Unimplemented reports whether the tool's output shows that the server
// answered codes.Unimplemented: a panic or an error distribution naming it.
func Unimplemented(stdout, stderr string) bool {
	for _, s := range []string{stdout, stderr} {
		if strings.Contains(s, "code = Unimplemented") {
			return true
		}
	}
	return false
}

// ErrNoSummary is returned by Result.Summary for a missing section.
var ErrNoSummary = errors.New("etcdbench: no such summary")

// Summary returns the section with the given label.
func (r Result) Summary(label string) (*stats.Summary, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	s, ok := r.Summaries[label]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSummary, label)
	}
	return s, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }
