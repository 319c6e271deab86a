package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// testdata/lease_printer_etcdctl_3.7.3.golden was written by etcdctl
// 3.7.3's own printers (command.NewPrinter) from the same responses, by the
// program in testdata/lease_printer_gen.go.txt (run it in a module that
// requires go.etcd.io/etcd/etcdctl/v3 v3.7.3, e.g. a copy of tools/etcd).

func leaseHdr() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: 14841639068965178418, MemberId: 10276657743932975437, Revision: 7, RaftTerm: 2}
}

func printLeases(t *testing.T) string {
	t.Helper()
	const id = 0x694d9a8c3b1e4f07
	cases := []struct {
		name string
		run  func(p leasePrinter) error
		pbOK bool
	}{
		{"grant", func(p leasePrinter) error {
			return p.Grant(&pb.LeaseGrantResponse{Header: leaseHdr(), ID: id, TTL: 60})
		}, true},
		{"grant-negative-id", func(p leasePrinter) error { return p.Grant(&pb.LeaseGrantResponse{Header: leaseHdr(), ID: -2, TTL: 2}) }, true},
		{"revoke", func(p leasePrinter) error { return p.Revoke(id, &pb.LeaseRevokeResponse{Header: leaseHdr()}) }, false},
		{"keepalive", func(p leasePrinter) error {
			return p.KeepAlive(&pb.LeaseKeepAliveResponse{Header: leaseHdr(), ID: id, TTL: 60})
		}, true},
		{"keepalive-gone", func(p leasePrinter) error {
			return p.KeepAlive(&pb.LeaseKeepAliveResponse{Header: leaseHdr(), ID: 0x1234})
		}, true},
		{"timetolive-keys", func(p leasePrinter) error {
			return p.TimeToLive(&pb.LeaseTimeToLiveResponse{Header: leaseHdr(), ID: id, TTL: 59, GrantedTTL: 60, Keys: [][]byte{[]byte("a"), []byte("b\x00c")}}, true)
		}, true},
		{"timetolive-nokeys", func(p leasePrinter) error {
			return p.TimeToLive(&pb.LeaseTimeToLiveResponse{Header: leaseHdr(), ID: id, TTL: 59, GrantedTTL: 60}, false)
		}, true},
		{"timetolive-nokeys-asked", func(p leasePrinter) error {
			return p.TimeToLive(&pb.LeaseTimeToLiveResponse{Header: leaseHdr(), ID: id, TTL: 59, GrantedTTL: 60}, true)
		}, true},
		{"timetolive-expired", func(p leasePrinter) error {
			return p.TimeToLive(&pb.LeaseTimeToLiveResponse{Header: leaseHdr(), ID: 0x99, TTL: -1}, true)
		}, true},
		{"leases", func(p leasePrinter) error {
			return p.Leases(&pb.LeaseLeasesResponse{Header: leaseHdr(), Leases: []*pb.LeaseStatus{{ID: id}, {ID: 0x10}}})
		}, true},
		{"leases-none", func(p leasePrinter) error { return p.Leases(&pb.LeaseLeasesResponse{Header: leaseHdr()}) }, true},
	}
	var out bytes.Buffer
	for _, c := range cases {
		for _, f := range []string{"simple", "simplehex", "json", "jsonhex", "fields", "fieldshex", "protobuf"} {
			if f == "protobuf" && !c.pbOK {
				continue
			}
			p := newPrinter(strings.TrimSuffix(f, "hex"), &out, &out, strings.HasSuffix(f, "hex")).(leasePrinter)
			fmt.Fprintf(&out, "=== %s %s\n", c.name, f)
			if err := c.run(p); err != nil {
				t.Fatalf("%s %s: %v", c.name, f, err)
			}
			fmt.Fprintln(&out)
		}
	}
	return out.String()
}

func TestLeasePrintersMatchEtcdctl(t *testing.T) {
	want, err := os.ReadFile("testdata/lease_printer_etcdctl_3.7.3.golden")
	if err != nil {
		t.Fatal(err)
	}
	got := printLeases(t)
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d differs:\n got %q\nwant %q", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("outputs differ in length: got %d lines, want %d", len(gl), len(wl))
	}
	// etcdctl refuses these outright.
	if err := (&pbPrinter{}).Revoke(1, &pb.LeaseRevokeResponse{Header: leaseHdr()}); err == nil ||
		!strings.HasPrefix(err.Error(), "marshal unsupported for type *clientv3.LeaseRevokeResponse") {
		t.Fatalf("protobuf revoke: %v", err)
	}
	if err := (&tablePrinter{}).Grant(&pb.LeaseGrantResponse{}); err == nil || err.Error() != "table not supported as output format" {
		t.Fatalf("table grant: %v", err)
	}
}
