package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protojson"
)

// The golden files in testdata were written by etcdctl 3.7.3's own
// printers (command.NewPrinter, and its EndpointStatus through reflection)
// from the same responses: revctl's output must match them byte for byte.

// printAll prints each fixture of testdata/printer_fixtures.txt ("kind
// protojson" per line) in every format, in the layout of the golden file.
func printAll(t *testing.T) string {
	t.Helper()
	f, err := os.Open("testdata/printer_fixtures.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		kind, js, _ := strings.Cut(sc.Text(), " ")
		for _, format := range []string{"simple", "simplehex", "json", "fields", "fieldshex", "protobuf"} {
			p := newPrinter(strings.TrimSuffix(format, "hex"), &out, &out, strings.HasSuffix(format, "hex"))
			fmt.Fprintf(&out, "=== %s %s\n", kind, format)
			var err error
			switch kind {
			case "get":
				r := &pb.RangeResponse{}
				if err = protojson.Unmarshal([]byte(js), r); err == nil {
					err = p.Get(r)
				}
			case "put":
				r := &pb.PutResponse{}
				if err = protojson.Unmarshal([]byte(js), r); err == nil {
					err = p.Put(r)
				}
			case "del":
				r := &pb.DeleteRangeResponse{}
				if err = protojson.Unmarshal([]byte(js), r); err == nil {
					err = p.Del(r)
				}
			case "txn":
				r := &pb.TxnResponse{}
				if err = protojson.Unmarshal([]byte(js), r); err == nil {
					err = p.Txn(r)
				}
			default:
				t.Fatalf("fixture kind %q", kind)
			}
			if err != nil {
				t.Fatalf("%s %s: %v", kind, format, err)
			}
			fmt.Fprintln(&out)
		}
	}
	return out.String()
}

func TestPrintersMatchEtcdctl(t *testing.T) {
	want, err := os.ReadFile("testdata/printer_etcdctl_3.7.3.golden")
	if err != nil {
		t.Fatal(err)
	}
	got := printAll(t)
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d:\n got %q\nwant %q", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("output has %d lines, want %d", len(gl), len(wl))
	}
}

func TestEndpointStatusMatchesEtcdctl(t *testing.T) {
	want, err := os.ReadFile("testdata/endpoint_status_etcdctl_3.7.3.golden")
	if err != nil {
		t.Fatal(err)
	}
	st := []epStatus{{Ep: "nats://127.0.0.1:4222", Resp: &pb.StatusResponse{
		Header:           &pb.ResponseHeader{ClusterId: 0xcdf818194e3a8c32, MemberId: 0x8e9e05c52164694d, Revision: 4, RaftTerm: 2},
		Version:          "3.7.3",
		StorageVersion:   "3.7.0",
		DbSize:           25000,
		DbSizeInUse:      20000,
		DbSizeQuota:      2 << 30,
		Leader:           0x8e9e05c52164694d,
		RaftIndex:        4,
		RaftAppliedIndex: 4,
		RaftTerm:         2,
		Errors:           []string{"NOSPACE", "CORRUPT"},
	}}}
	var out bytes.Buffer
	for _, format := range []string{"simple", "json", "fields", "table"} {
		fmt.Fprintf(&out, "=== %s\n", format)
		if err := newPrinter(format, &out, &out, false).EndpointStatus(st); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&out)
	}
	if out.String() != string(want) {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestSimplePrinterValueOnly(t *testing.T) {
	var out bytes.Buffer
	p := &simplePrinter{w: &out, valueOnly: true}
	p.Get(&pb.RangeResponse{Kvs: []*mvccpb.KeyValue{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}})
	if out.String() != "1\n2\n" {
		t.Fatalf("got %q", out.String())
	}
}

func TestUnsupportedFormats(t *testing.T) {
	var out bytes.Buffer
	if err := newPrinter("table", &out, &out, false).Get(&pb.RangeResponse{}); err == nil || err.Error() != "table not supported as output format" {
		t.Errorf("table get: %v", err)
	}
	if err := newPrinter("protobuf", &out, &out, false).EndpointStatus(nil); err == nil || err.Error() != "protobuf not supported as output format" {
		t.Errorf("protobuf endpoint status: %v", err)
	}
	if newPrinter("yaml", &out, &out, false) != nil {
		t.Error("yaml printer exists")
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 9: "9 B", 10: "10 B", 999: "999 B", 1000: "1.0 kB", 1049: "1.0 kB", 1050: "1.1 kB",
		25000: "25 kB", 82854982: "83 MB", 2 << 30: "2.1 GB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestNotInUseEmptyDB(t *testing.T) {
	if got := notInUse(&pb.StatusResponse{}); got != "0%" {
		t.Fatalf("got %q", got)
	}
}
