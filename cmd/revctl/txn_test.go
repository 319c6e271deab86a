package main

import (
	"bufio"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// Expected results below were checked against etcdctl 3.7.3's Argify and
// ParseCompare on the same input.

func TestArgify(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"foo bar baz", []string{"foo", "bar", "baz"}},
		{"'hello world'", []string{"hello world"}},
		{`"hello world"`, []string{"hello world"}},
		{"put 'my key' 'my value'", []string{"put", "my key", "my value"}},
		{"''", []string{""}},
		{`""`, []string{""}},
		{`"hello\"world"`, []string{`hello"world`}},
		{`put key1 "overwrote-key1"`, []string{"put", "key1", "overwrote-key1"}},
		{`put key2 "this is\na multi-line\nvalue"`, []string{"put", "key2", "this is\na multi-line\nvalue"}},
		{`get a"b c`, []string{"get", `a"b`, "c"}},
		{`"abc"def`, []string{"abc", "def"}},
		{"'abc", []string{"abc"}},
		{`"abc`, []string{"abc"}},
		{"x'y'z", []string{"x'y'z"}},
		{"a  b\tc", []string{"a", "b", "c"}},
		{"put k 'it''s'", []string{"put", "k", "it", "s"}},
		{`put "k" -- "-v"`, []string{"put", "k", "--", "-v"}},
		{`"a\\" b`, []string{`a\`, "b"}},
		{"''a", []string{"", "a"}},
		{`"unterminated \" still`, []string{"unterminated", `\"`, "still"}},
		{`'a"b' "c'd"`, []string{`a"b`, "c'd"}},
		{`"\x41\u00e9"`, []string{"Aé"}},
		{`x"y"`, []string{`x"y"`}},
		{`"a"'b'`, []string{"a", "b"}},
	} {
		got, err := argify(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("argify(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := argify(`put k "\q"`); err == nil {
		t.Error(`argify accepted the bad escape "\q"`)
	}
}

func cmpOf(key string, target pb.Compare_CompareTarget, result pb.Compare_CompareResult, v any) *pb.Compare {
	c := &pb.Compare{Key: []byte(key), Target: target, Result: result}
	switch target {
	case pb.Compare_VERSION:
		c.TargetUnion = &pb.Compare_Version{Version: v.(int64)}
	case pb.Compare_CREATE:
		c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: v.(int64)}
	case pb.Compare_MOD:
		c.TargetUnion = &pb.Compare_ModRevision{ModRevision: v.(int64)}
	case pb.Compare_VALUE:
		c.TargetUnion = &pb.Compare_Value{Value: []byte(v.(string))}
	case pb.Compare_LEASE:
		c.TargetUnion = &pb.Compare_Lease{Lease: v.(int64)}
	}
	return c
}

func TestParseCompare(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *pb.Compare
		err  string
	}{
		// etcdctl's documented examples.
		{in: `mod("key1") > "0"`, want: cmpOf("key1", pb.Compare_MOD, pb.Compare_GREATER, int64(0))},
		{in: `m("key1") = "5"`, want: cmpOf("key1", pb.Compare_MOD, pb.Compare_EQUAL, int64(5))},
		{in: `c("key1") < "5"`, want: cmpOf("key1", pb.Compare_CREATE, pb.Compare_LESS, int64(5))},
		{in: `create("key1") < "5"`, want: cmpOf("key1", pb.Compare_CREATE, pb.Compare_LESS, int64(5))},
		{in: `ver("key1") = "1"`, want: cmpOf("key1", pb.Compare_VERSION, pb.Compare_EQUAL, int64(1))},
		{in: `version("key1") != "1"`, want: cmpOf("key1", pb.Compare_VERSION, pb.Compare_NOT_EQUAL, int64(1))},
		{in: `val("key1") = "v"`, want: cmpOf("key1", pb.Compare_VALUE, pb.Compare_EQUAL, "v")},
		{in: `value("key1") = "v 1"`, want: cmpOf("key1", pb.Compare_VALUE, pb.Compare_EQUAL, "v 1")},
		{in: `value("key1") = ""`, want: cmpOf("key1", pb.Compare_VALUE, pb.Compare_EQUAL, "")},
		{in: "value(`key1`) = `raw`", want: cmpOf("key1", pb.Compare_VALUE, pb.Compare_EQUAL, "raw")},
		{in: `value("k\"1") = "v"`, want: cmpOf(`k"1`, pb.Compare_VALUE, pb.Compare_EQUAL, "v")},
		{in: `value("key1") > "v"`, want: cmpOf("key1", pb.Compare_VALUE, pb.Compare_GREATER, "v")},
		{in: `mod( "key1") > "0"`, want: cmpOf("key1", pb.Compare_MOD, pb.Compare_GREATER, int64(0))},
		{in: `value("key1")   =   "v"`, want: cmpOf("key1", pb.Compare_VALUE, pb.Compare_EQUAL, "v")},
		{in: `value("key1") = "v" trailing junk`, want: cmpOf("key1", pb.Compare_VALUE, pb.Compare_EQUAL, "v")},
		{in: `mod("key1") > "-5"`, want: cmpOf("key1", pb.Compare_MOD, pb.Compare_GREATER, int64(-5))},
		{in: `value("") = "v"`, want: cmpOf("", pb.Compare_VALUE, pb.Compare_EQUAL, "v")},
		// Leases are hexadecimal (etcdctl 3.7.3 panics on any lease compare).
		{in: `lease("key1") = "694d805a644f280d"`, want: cmpOf("key1", pb.Compare_LEASE, pb.Compare_EQUAL, int64(0x694d805a644f280d))},
		{in: `lease("key1") = "0"`, want: cmpOf("key1", pb.Compare_LEASE, pb.Compare_EQUAL, int64(0))},

		{in: `mod("key1")>"0"`, err: `malformed comparison: mod("key1")>"0"; got mod("key1")  ""`},
		{in: `mod ("key1") > "0"`, err: `malformed comparison: mod ("key1") > "0" (unknown target mod )`},
		{in: `mod("key1") > 0`, err: `malformed comparison: mod("key1") > 0; got mod("key1") > ""`},
		{in: `mod("key1") > "abc"`, err: `invalid txn compare request: mod("key1") > "abc"`},
		{in: `mod("key1") > "99999999999999999999"`, err: `invalid txn compare request: mod("key1") > "99999999999999999999"`},
		{in: `lease("key1") = "xyz"`, err: `invalid txn compare request: lease("key1") = "xyz"`},
		{in: `foo("key1") = "v"`, err: `malformed comparison: foo("key1") = "v" (unknown target foo)`},
		{in: `value"key1" = "v"`, err: `malformed comparison: value"key1" = "v"`},
		{in: `value("key1" = "v"`, err: `malformed comparison: value("key1" = "v"; got value("key1")  ""`},
		{in: `value("key1")`, err: `malformed comparison: value("key1"); got value("key1")  ""`},
		{in: `value("key1") =`, err: `malformed comparison: value("key1") =; got value("key1") = ""`},
		{in: `value("key1") ="v"`, err: `malformed comparison: value("key1") ="v"; got value("key1") ="v" ""`},
		{in: `value() = "v"`, err: `malformed comparison: value() = "v"; got value("")  ""`},
		{in: `("key1") = "v"`, err: `malformed comparison: ("key1") = "v" (unknown target )`},
		{in: `value("key1") == "v"`, err: `malformed comparison: value("key1") == "v" (unknown operator ==; want =, !=, > or <)`},
	} {
		got, err := parseCompare(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("parseCompare(%s) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !proto.Equal(got, tc.want) {
			t.Errorf("parseCompare(%s) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func rangeOp(r *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

func putOp(r *pb.PutRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: r}}
}

func delOp(r *pb.DeleteRangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: r}}
}

func TestParseRequestOp(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *pb.RequestOp
		code int
		err  string
		warn string
	}{
		{in: `put key1 "overwrote-key1"`, want: putOp(&pb.PutRequest{Key: []byte("key1"), Value: []byte("overwrote-key1")})},
		{in: `put key2 "some extra key"`, want: putOp(&pb.PutRequest{Key: []byte("key2"), Value: []byte("some extra key")})},
		{in: `put k v --prev-kv --lease=1f`, want: putOp(&pb.PutRequest{Key: []byte("k"), Value: []byte("v"), PrevKv: true, Lease: 0x1f})},
		{in: `put k --ignore-value`, want: putOp(&pb.PutRequest{Key: []byte("k"), IgnoreValue: true})},
		{in: `put -- k -v`, want: putOp(&pb.PutRequest{Key: []byte("k"), Value: []byte("-v")})},
		{in: `p k v`, want: putOp(&pb.PutRequest{Key: []byte("k"), Value: []byte("v")})},
		{in: `get key1`, want: rangeOp(&pb.RangeRequest{Key: []byte("key1")})},
		{in: `get a c`, want: rangeOp(&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c")})},
		{in: `get foo --prefix --limit 2`, want: rangeOp(&pb.RangeRequest{Key: []byte("foo"), RangeEnd: []byte("fop"), Limit: 2})},
		{in: `get "" --prefix`, want: rangeOp(&pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})},
		{in: `get a --from-key --keys-only`, want: rangeOp(&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte{0}, KeysOnly: true})},
		{in: `get a --sort-by=MODIFY --order=descend --rev=3 --consistency=s`, want: rangeOp(&pb.RangeRequest{
			Key: []byte("a"), SortTarget: pb.RangeRequest_MOD, SortOrder: pb.RangeRequest_DESCEND, Revision: 3, Serializable: true})},
		{in: `get a --order ASCEND`, want: rangeOp(&pb.RangeRequest{Key: []byte("a")})},
		{in: `g a`, want: rangeOp(&pb.RangeRequest{Key: []byte("a")})},
		{in: `del key1`, want: delOp(&pb.DeleteRangeRequest{Key: []byte("key1")})},
		{in: `del k --prefix --prev-kv`, want: delOp(&pb.DeleteRangeRequest{Key: []byte("k"), RangeEnd: []byte("l"), PrevKv: true})},
		{in: `del "\xff" --prefix`, want: delOp(&pb.DeleteRangeRequest{Key: []byte{0xff}, RangeEnd: []byte{0}})},
		{in: `del a z --range`, want: delOp(&pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("z")})},
		{in: `del a z`, want: delOp(&pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("z")}),
			warn: "Warning: Keys between \"a\" and \"z\" will be deleted. Please interrupt the command within next 2 seconds to cancel. You can provide `--range` flag to avoid the delay.\n"},

		{in: `put`, code: exitInvalidInput, err: "invalid txn compare request: put"},
		{in: `watch key`, code: exitInvalidInput, err: "invalid txn request: watch key"},
		{in: `put k v --bogus`, code: exitInvalidInput, err: "invalid txn request: put k v --bogus"},
		{in: `get k --limit=x`, code: exitInvalidInput, err: "invalid txn request: get k --limit=x"},
		{in: `put k -w json`, code: exitInvalidInput, err: "invalid txn request: put k -w json"},
		{in: `put k`, code: exitBadArgs, err: "put command needs 1 argument and input from stdin or 2 arguments"},
		{in: `put k v --lease=zz`, code: exitBadArgs, err: `bad lease ID (strconv.ParseInt: parsing "zz": invalid syntax), expecting ID in Hex`},
		{in: `get k --prefix --from-key`, code: exitBadArgs, err: "`--prefix` and `--from-key` cannot be set at the same time, choose one"},
		{in: `get k --sort-by=SIZE`, code: exitBadFeature, err: "bad sort target SIZE"},
		{in: `del a b c`, code: exitBadArgs, err: "del command needs one argument as key and an optional argument as range_end"},
		{in: `put k "\q"`, code: exitInvalidInput, err: "invalid syntax"},
	} {
		var warn strings.Builder
		var slept time.Duration
		got, err := parseRequestOp(tc.in, &warn, func(d time.Duration) { slept += d })
		if tc.err != "" {
			var e *exitErr
			if err == nil || err.Error() != tc.err || !errors.As(err, &e) || e.code != tc.code {
				t.Errorf("parseRequestOp(%s) error = %v (%T), want %q exit %d", tc.in, err, err, tc.err, tc.code)
			}
			continue
		}
		if err != nil || !proto.Equal(got, tc.want) {
			t.Errorf("parseRequestOp(%s) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if warn.String() != tc.warn {
			t.Errorf("parseRequestOp(%s) warned %q, want %q", tc.in, warn.String(), tc.warn)
		}
		if (tc.warn != "") != (slept == 2*time.Second) {
			t.Errorf("parseRequestOp(%s) slept %v", tc.in, slept)
		}
	}
}

func TestReadSections(t *testing.T) {
	// The whole etcdctl README example, trailing blank line included.
	in := bufio.NewReader(strings.NewReader("mod(\"key1\") > \"0\"\n\nput key1 \"overwrote-key1\"\n\nput key1 \"created-key1\"\nput key2 \"some extra key\"\n\n"))
	cmps, err := readCompares(in)
	if err != nil || len(cmps) != 1 {
		t.Fatalf("compares %v, %v", cmps, err)
	}
	nop := func(time.Duration) {}
	succ, err := readOps(in, io.Discard, nop)
	if err != nil || len(succ) != 1 {
		t.Fatalf("success %v, %v", succ, err)
	}
	fail, err := readOps(in, io.Discard, nop)
	if err != nil || len(fail) != 2 {
		t.Fatalf("failure %v, %v", fail, err)
	}

	// Like etcdctl, input must end each section with a blank line: a
	// missing one, or a last line without its newline, is "EOF" (exit 3).
	for _, src := range []string{"mod(\"k\") > \"0\"", "mod(\"k\") > \"0\"\n"} {
		_, err := readCompares(bufio.NewReader(strings.NewReader(src)))
		var e *exitErr
		if !errors.Is(err, io.EOF) || !errors.As(err, &e) || e.code != exitInvalidInput {
			t.Errorf("readCompares(%q) = %v, want EOF exit 3", src, err)
		}
	}
	// Surrounding spaces are trimmed; a line of spaces ends a section.
	cmps, err = readCompares(bufio.NewReader(strings.NewReader("   mod(\"k\") > \"0\"   \n \t \n")))
	if err != nil || len(cmps) != 1 {
		t.Fatalf("compares %v, %v", cmps, err)
	}
}
