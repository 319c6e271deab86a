package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"

	"revd/tests/testutil"
)

// minorityAnswers are what a member cut off from the others answers.
type minorityAnswers struct {
	put, linearizable, serializable string // error texts with gRPC codes, "" for none
	serializableValue               string
	// statusErrors are Status's errors; health and healthSerializable
	// /health's and /health?serializable=true's status and body;
	// hasLeader etcd_server_has_leader in /metrics.
	statusErrors, health, healthSerializable string
	hasLeader                                float64
	// alarmList is what etcdctl alarm list gets (etcd sends it through
	// raft).
	alarmList string
}

// httpAnswer is the status code and body of a GET of url.
func httpAnswer(t *testing.T, url string) string {
	t.Helper()
	cli := http.Client{Timeout: 15 * time.Second}
	resp, err := cli.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}

// cutOff runs the partition scenario on a cluster of kind: a follower is
// cut off from the others (its peer traffic dropped by the proxies), and
// once it knows it has no leader it is asked for a write and for both
// kinds of reads; the majority goes on writing; healed, the member catches
// up. It returns what the cut-off member answered.
func cutOff(t *testing.T, kind string) minorityAnswers {
	c := testutil.StartCluster(t, kind, testutil.ClusterOptions{Proxy: true})
	all := c.Client()
	ctx := context.Background()
	if _, err := all.Put(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	lead := c.Leader()
	x := (lead + 1) % len(c.Members)
	id := c.MemberID(x)
	// Every member has "before" applied before the cut.
	for i := range c.Members {
		if _, err := c.Client(i).Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	c.Isolate(x, id, true)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st := c.Status(x); st != nil && st.Leader == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the cut-off member still names a leader", kind)
		}
	}
	others := c.Client(lead, (lead+2)%len(c.Members))
	if _, err := others.Put(ctx, "k", "during"); err != nil {
		t.Fatalf("%s: the majority refused a write: %v", kind, err)
	}
	minority := c.Client(x)
	var a minorityAnswers
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		st, _ := status.FromError(err)
		return st.Code().String() + ": " + st.Message()
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err := minority.Put(cctx, "k", "minority")
	cancel()
	a.put = errText(err)
	cctx, cancel = context.WithTimeout(ctx, 15*time.Second)
	_, err = minority.Get(cctx, "k")
	cancel()
	a.linearizable = errText(err)
	cctx, cancel = context.WithTimeout(ctx, 15*time.Second)
	resp, err := minority.Get(cctx, "k", clientv3.WithSerializable())
	cancel()
	a.serializable = errText(err)
	if err == nil && len(resp.Kvs) == 1 {
		a.serializableValue = string(resp.Kvs[0].Value)
	}
	if st := c.Status(x); st != nil {
		a.statusErrors = strings.Join(st.Errors, ", ")
	}
	cctx, cancel = context.WithTimeout(ctx, 15*time.Second)
	_, err = minority.AlarmList(cctx)
	cancel()
	a.alarmList = errText(err)
	a.health = httpAnswer(t, c.Members[x].ClientURL+"/health")
	a.healthSerializable = httpAnswer(t, c.Members[x].ClientURL+"/health?serializable=true")
	a.hasLeader = scrapeServer(t, c.Members[x].ClientURL)["has_leader"]
	c.Isolate(x, id, false)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := minority.Get(ctx, "k", clientv3.WithSerializable())
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "during" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the healed member did not catch up: %v %v", kind, resp, err)
		}
	}
	return a
}

// TestPartition: a member cut off from the others refuses writes and
// linearizable reads with etcd's errors, serves serializable reads from
// what it has, and catches up once healed; the majority goes on. Its
// Status lists "etcdserver: no leader", its /health answers "RAFT NO
// LEADER" (and healthy if serializable), its /metrics
// etcd_server_has_leader 0, and it fails to list alarms: all as etcd's
// cut-off member.
func TestPartition(t *testing.T) {
	got := cutOff(t, testutil.KindRevd)
	want := cutOff(t, testutil.KindEtcd)
	t.Logf("etcd: %+v", want)
	t.Logf("revd: %+v", got)
	if got.put == "" || got.linearizable == "" {
		t.Fatalf("the cut-off member served a write or a linearizable read: %+v", got)
	}
	if got.serializable != "" || got.serializableValue != "before" {
		t.Fatalf("the cut-off member's serializable read: %+v, want \"before\"", got)
	}
	if got.statusErrors != "etcdserver: no leader" || got.hasLeader != 0 || got.alarmList == "" ||
		got.health != `503 {"health":"false","reason":"RAFT NO LEADER"}` {
		t.Fatalf("the cut-off member's status, health and metrics: %+v", got)
	}
	if got != want {
		t.Fatalf("revd answered %+v, etcd %+v", got, want)
	}
}
