package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/tests/testutil"
)

// self stands for the server's own member id (hex) in clusterSession.
const self = "SELF"

// clusterSession is the sequence of etcdctl's cluster, maintenance and
// auth commands run against both servers.
func clusterSession() [][]string {
	return [][]string{
		{"member", "list"},
		{"member", "list", "-w", "table"},
		{"member", "list", "-w", "json"},
		{"endpoint", "status", "--cluster"},
		{"endpoint", "health", "--cluster"},
		{"put", "k", "v"},
		{"put", "k", "w"},
		{"compaction", "--physical", "3"},
		{"defrag"},
		{"defrag", "--cluster"},
		{"get", "k"},
		{"move-leader", self},
		{"move-leader", "1234"},
		{"member", "remove", "1234"},
		{"member", "update", "1234", "--peer-urls=http://127.0.0.1:9"},
		{"member", "promote", "1234"},
		{"member", "promote", self},
		{"member", "add", "x", "--peer-urls=127.0.0.1:9"},
		{"member", "remove", self},
		{"member", "list"},
		{"endpoint", "status", "--cluster", "-w", "json"},
		// Authentication off, no users or roles: etcd's answers.
		{"auth", "status"},
		{"auth", "status", "-w", "json"},
		{"user", "list"},
		{"role", "list"},
		{"user", "get", "alice"},
		{"role", "get", "reader"},
		{"auth", "disable"},
		{"--user", "root:secret", "get", "k"},
	}
}

// TestEtcdctlCluster runs etcdctl 3.7.3's member, defrag and move-leader
// commands (and the --cluster forms of endpoint status and health, which
// find the endpoints through the member list) against a fresh etcd and a
// fresh target, and requires the same output. Each server's own member id
// takes the place of SELF; in the output, the ids, etcd's peer URL (revd
// has no peers: its member lists none) and timings are normalized.
func TestEtcdctlCluster(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	_, ctl := testutil.EtcdBin(t)
	ref := testutil.StartEtcd(t, testutil.Options{})
	tgt := testutil.Start(t, kind, testutil.Options{})
	refNorm, tgtNorm := memberNormalizer(t, ref), memberNormalizer(t, tgt)

	for i, args := range clusterSession() {
		run := func(p *testutil.Proc, norm func(string) string, id string) ctlResult {
			a := make([]string, len(args))
			for j, s := range args {
				a[j] = strings.ReplaceAll(s, self, id)
			}
			r := etcdctl(t, ctl, p.Endpoint, "", a...)
			r.Stdout, r.Stderr = norm(normalize(r.Stdout, p.Endpoint)), norm(normalize(r.Stderr, p.Endpoint))
			return r
		}
		want := run(ref, refNorm.apply, refNorm.hexID)
		got := run(tgt, tgtNorm.apply, tgtNorm.hexID)
		if *showOutput {
			t.Logf("#%d etcdctl %s\n%s", i, strings.Join(args, " "), want)
		}
		if want != got {
			t.Fatalf("command #%d: etcdctl %s\netcd 3.7.3:\n%s\n%s:\n%s", i, strings.Join(args, " "), want, kind, got)
		}
	}
}

// tookPlain is the timing of etcdctl defrag: "took 1.2ms".
var tookPlain = regexp.MustCompile(`took [0-9.]+[a-zµ]+`)

// member is what differs between two servers' member lists.
type member struct {
	hexID, decID string
	peerURLs     []string
}

// memberNormalizer reads p's member list over gRPC.
func memberNormalizer(t *testing.T, p *testutil.Proc) member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := p.Dial(t).Cluster.MemberList(ctx, &pb.MemberListRequest{})
	if err != nil {
		t.Fatalf("%s: MemberList: %v", p.Kind, err)
	}
	if len(r.Members) != 1 {
		t.Fatalf("%s: %d members, want 1", p.Kind, len(r.Members))
	}
	m := r.Members[0]
	return member{hexID: fmt.Sprintf("%x", m.ID), decID: fmt.Sprint(m.ID), peerURLs: m.PeerURLs}
}

// apply replaces the member's ids with MEMBER and drops its peer URLs.
func (m member) apply(s string) string {
	for _, u := range m.peerURLs {
		s = strings.ReplaceAll(s, `"peerURLs":["`+u+`"],`, "")
		s = strings.ReplaceAll(s, u, "")
	}
	s = strings.ReplaceAll(s, m.hexID, "MEMBER")
	s = strings.ReplaceAll(s, m.decID, "MEMBER")
	return tookPlain.ReplaceAllString(s, "took T")
}

// TestAdvertiseClientURLs: the member list reports --advertise-client-urls
// when given, and the listen URLs otherwise.
func TestAdvertiseClientURLs(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's flag; etcd's is covered by etcd")
	}
	urls := []string{"http://10.0.0.1:2379", "https://db.example:443"}
	p := testutil.StartRevd(t, testutil.Options{ExtraArgs: []string{"--advertise-client-urls=" + strings.Join(urls, ",")}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := p.Dial(t).Cluster.MemberList(ctx, &pb.MemberListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Members) != 1 || !slices.Equal(r.Members[0].ClientURLs, urls) {
		t.Errorf("member list %v, want one member with client URLs %v", r.Members, urls)
	}
}
