package main

import (
	"reflect"
	"testing"
)

func TestFlagSet(t *testing.T) {
	type vals struct {
		w      string
		i, p   bool
		limit  int64
		lease  string
		posArg []string
	}
	for _, tc := range []struct {
		args []string
		want vals
		err  string
	}{
		{args: []string{"k"}, want: vals{w: "simple", lease: "0", posArg: []string{"k"}}},
		{args: []string{"--prefix", "k", "--limit", "5", "z"}, want: vals{w: "simple", lease: "0", p: true, limit: 5, posArg: []string{"k", "z"}}},
		{args: []string{"k", "--limit=5", "--prefix=false"}, want: vals{w: "simple", lease: "0", limit: 5, posArg: []string{"k"}}},
		{args: []string{"-w", "json", "k"}, want: vals{w: "json", lease: "0", posArg: []string{"k"}}},
		{args: []string{"-wjson"}, want: vals{w: "json", lease: "0"}},
		{args: []string{"-w=json"}, want: vals{w: "json", lease: "0"}},
		{args: []string{"-iwjson"}, want: vals{w: "json", i: true, lease: "0"}},
		{args: []string{"-i", "--", "-k", "--prefix"}, want: vals{w: "simple", i: true, lease: "0", posArg: []string{"-k", "--prefix"}}},
		{args: []string{"-", "--lease", "-5"}, want: vals{w: "simple", lease: "-5", posArg: []string{"-"}}},
		{args: []string{"--bogus"}, err: "unknown flag: --bogus"},
		{args: []string{"--"}, want: vals{w: "simple", lease: "0"}},
		{args: []string{"--=x"}, err: "unknown flag: --"},
		{args: []string{"-prefix"}, err: "unknown shorthand flag: 'p' in -prefix"},
		{args: []string{"-5"}, err: "unknown shorthand flag: '5' in -5"},
		{args: []string{"--limit"}, err: "flag needs an argument: --limit"},
		{args: []string{"-w"}, err: "flag needs an argument: 'w' in -w"},
		{args: []string{"--limit", "x"}, err: `invalid argument "x" for "--limit" flag: parse error`},
		{args: []string{"--prefix=maybe"}, err: `invalid argument "maybe" for "--prefix" flag: parse error`},
	} {
		var v vals
		fs := newFlagSet("test")
		fs.fs.StringVar(&v.w, "write-out", "simple", "")
		fs.shorthand('w', "write-out")
		fs.fs.BoolVar(&v.i, "interactive", false, "")
		fs.shorthand('i', "interactive")
		fs.fs.BoolVar(&v.p, "prefix", false, "")
		fs.fs.Int64Var(&v.limit, "limit", 0, "")
		fs.fs.StringVar(&v.lease, "lease", "0", "")
		pos, err := fs.parse(tc.args)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("parse(%q) error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		v.posArg = pos
		if err != nil || !reflect.DeepEqual(v, tc.want) {
			t.Errorf("parse(%q) = %+v, %v; want %+v", tc.args, v, err, tc.want)
		}
	}
}

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
		rest []string
	}{
		{[]string{"get", "k"}, "get", []string{"k"}},
		{[]string{"--nats-url", "nats://x", "-w", "json", "get", "k"}, "get", []string{"--nats-url", "nats://x", "-w", "json", "k"}},
		{[]string{"--hex", "get"}, "get", []string{"--hex"}},
		{[]string{"--timeout=1s", "-wjson", "put", "k", "v"}, "put", []string{"--timeout=1s", "-wjson", "k", "v"}},
		{[]string{"--user", "alice:pw", "--password", "x", "--auth-jwt-token", "t", "get", "k"}, "get",
			[]string{"--user", "alice:pw", "--password", "x", "--auth-jwt-token", "t", "k"}},
		{[]string{"-h"}, "help", nil},
		{nil, "", nil},
	} {
		name, rest, err := splitCommand(tc.args)
		if err != nil || name != tc.name || !reflect.DeepEqual(rest, tc.rest) {
			t.Errorf("splitCommand(%q) = %q, %q, %v; want %q, %q", tc.args, name, rest, err, tc.name, tc.rest)
		}
	}
}
