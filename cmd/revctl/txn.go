package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The txn command reads etcdctl's transaction syntax from stdin:
//
//	<compare>*  blank line  <success op>*  blank line  <failure op>*  blank line
//
// A compare is `target("key") op "value"` with target one of ver/version,
// c/create, m/mod, val/value and lease, op one of = != < >, and key and
// value Go-quoted strings; revisions and versions are decimal, leases
// hexadecimal (as put --lease takes them and etcdctl prints them). An op is
// a get, put or del command line with that command's flags; words may be
// "double quoted" with Go escapes or 'single quoted'. As with etcdctl, every
// section must end with a blank line, including the last: input that ends
// before it is an error ("EOF"). With -i, a prompt precedes each section.

func txnCommand(r *runner, fs *flagSet) func([]string) error {
	var interactive bool
	fs.fs.BoolVar(&interactive, "interactive", false, "Input transaction in interactive mode")
	fs.shorthand('i', "interactive")
	return func(args []string) error {
		if len(args) != 0 {
			return exitErrorf(exitBadArgs, "txn command does not accept argument")
		}
		kv, err := r.client() // etcdctl connects before reading the input
		if err != nil {
			return err
		}
		in := bufio.NewReader(r.stdin)
		prompt := func(s string) {
			if interactive {
				fmt.Fprintln(r.stdout, s)
			}
		}
		req := &pb.TxnRequest{}
		prompt("compares:")
		if req.Compare, err = readCompares(in); err != nil {
			return err
		}
		prompt("success requests (get, put, del):")
		if req.Success, err = readOps(in, r.stderr, r.sleep); err != nil {
			return err
		}
		prompt("failure requests (get, put, del):")
		if req.Failure, err = readOps(in, r.stderr, r.sleep); err != nil {
			return err
		}

		ctx, cancel := r.ctx()
		resp, err := kv.Txn(ctx, req)
		cancel()
		if err != nil {
			return err
		}
		return r.display.Txn(resp)
	}
}

// readLines calls parse on each line up to the next blank one.
func readLines(in *bufio.Reader, parse func(line string) error) error {
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return &exitErr{code: exitInvalidInput, err: err}
		}
		line = strings.TrimSpace(line)
		if line == "" {
			return nil
		}
		if err := parse(line); err != nil {
			return err
		}
	}
}

func readCompares(in *bufio.Reader) ([]*pb.Compare, error) {
	var cmps []*pb.Compare
	err := readLines(in, func(line string) error {
		c, err := parseCompare(line)
		if err != nil {
			return &exitErr{code: exitInvalidInput, err: err}
		}
		cmps = append(cmps, c)
		return nil
	})
	return cmps, err
}

func readOps(in *bufio.Reader, stderr io.Writer, sleep func(time.Duration)) ([]*pb.RequestOp, error) {
	var ops []*pb.RequestOp
	err := readLines(in, func(line string) error {
		op, err := parseRequestOp(line, stderr, sleep)
		if err != nil {
			return err
		}
		ops = append(ops, op)
		return nil
	})
	return ops, err
}

// parseCompare parses one compare line, e.g. `mod("key1") > "0"`.
func parseCompare(line string) (*pb.Compare, error) {
	target, rest, ok := strings.Cut(line, "(")
	if !ok {
		return nil, fmt.Errorf("malformed comparison: %s", line)
	}
	var key, op, val string
	// The scan format is etcdctl's: it fixes what spacing and quoting are
	// accepted (and that text after the value is ignored).
	n, serr := fmt.Sscanf(rest, "%q) %s %q", &key, &op, &val)
	if n != 3 {
		return nil, fmt.Errorf("malformed comparison: %s; got %s(%q) %s %q", line, target, key, op, val)
	}
	if serr != nil {
		return nil, fmt.Errorf("malformed comparison: %s (%w)", line, serr)
	}

	c := &pb.Compare{Key: []byte(key)}
	var err error
	switch target {
	case "ver", "version":
		var v int64
		v, err = strconv.ParseInt(val, 10, 64)
		c.Target, c.TargetUnion = pb.Compare_VERSION, &pb.Compare_Version{Version: v}
	case "c", "create":
		var v int64
		v, err = strconv.ParseInt(val, 10, 64)
		c.Target, c.TargetUnion = pb.Compare_CREATE, &pb.Compare_CreateRevision{CreateRevision: v}
	case "m", "mod":
		var v int64
		v, err = strconv.ParseInt(val, 10, 64)
		c.Target, c.TargetUnion = pb.Compare_MOD, &pb.Compare_ModRevision{ModRevision: v}
	case "val", "value":
		c.Target, c.TargetUnion = pb.Compare_VALUE, &pb.Compare_Value{Value: []byte(val)}
	case "lease":
		var v int64
		v, err = strconv.ParseInt(val, 16, 64)
		c.Target, c.TargetUnion = pb.Compare_LEASE, &pb.Compare_Lease{Lease: v}
	default:
		return nil, fmt.Errorf("malformed comparison: %s (unknown target %s)", line, target)
	}
	if err != nil {
		return nil, fmt.Errorf("invalid txn compare request: %s", line)
	}
	switch op {
	case "=":
		c.Result = pb.Compare_EQUAL
	case "!=":
		c.Result = pb.Compare_NOT_EQUAL
	case ">":
		c.Result = pb.Compare_GREATER
	case "<":
		c.Result = pb.Compare_LESS
	default:
		return nil, fmt.Errorf("malformed comparison: %s (unknown operator %s; want =, !=, > or <)", line, op)
	}
	return c, nil
}

// parseRequestOp parses one operation line: a get, put or del command line
// (names may be abbreviated, as etcdctl allows) with that command's flags.
// A line that does not parse is exitInvalidInput "invalid txn request"; a
// command line that parses but is wrong fails as the command would.
func parseRequestOp(line string, stderr io.Writer, sleep func(time.Duration)) (*pb.RequestOp, error) {
	args, err := argify(line)
	if err != nil {
		return nil, &exitErr{code: exitInvalidInput, err: err}
	}
	if len(args) < 2 {
		return nil, exitErrorf(exitInvalidInput, "invalid txn compare request: %s", line)
	}
	invalid := exitErrorf(exitInvalidInput, "invalid txn request: %s", line)
	name := ""
	for _, c := range []string{"get", "put", "del"} {
		if args[0] != "" && strings.HasPrefix(c, args[0]) {
			name = c
		}
	}
	fs := newFlagSet(name)
	switch name {
	case "get":
		var o getOptions
		o.define(fs)
		pos, err := fs.parse(args[1:])
		if err != nil {
			return nil, invalid
		}
		req, err := o.request(pos)
		if err != nil {
			return nil, err
		}
		return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: req}}, nil
	case "put":
		var o putOptions
		o.define(fs)
		pos, err := fs.parse(args[1:])
		if err != nil {
			return nil, invalid
		}
		// stdin holds the transaction itself: a value must be given.
		req, err := o.request(pos, nil)
		if err != nil {
			return nil, err
		}
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: req}}, nil
	case "del":
		var o delOptions
		o.define(fs)
		pos, err := fs.parse(args[1:])
		if err != nil {
			return nil, invalid
		}
		req, err := o.request(pos, stderr, sleep)
		if err != nil {
			return nil, err
		}
		return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: req}}, nil
	}
	return nil, invalid
}

// argify splits a txn operation line into words as etcdctl does: a word is
// a "double-quoted" Go string (unquoted, escapes and all), a 'single-quoted'
// string (taken literally) or a run of non-space characters. A quote that
// is never closed is skipped.
func argify(s string) ([]string, error) {
	var args []string
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case isSpace(c):
			i++
		case c == '"':
			end := closingQuote(s, i)
			if end < 0 {
				i++
				continue
			}
			w, err := strconv.Unquote(s[i : end+1])
			if err != nil {
				return nil, err
			}
			args = append(args, w)
			i = end + 1
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				i++
				continue
			}
			args = append(args, s[i+1:i+1+end])
			i += end + 2
		default:
			j := i
			for j < len(s) && !isSpace(s[j]) {
				j++
			}
			args = append(args, s[i:j])
			i = j
		}
	}
	return args, nil
}

// closingQuote returns the index of the '"' that closes the one at s[i],
// skipping backslash escapes, or -1.
func closingQuote(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if j+1 < len(s) && s[j+1] == '\n' {
				return -1
			}
			j++
		case '"':
			return j
		}
	}
	return -1
}
