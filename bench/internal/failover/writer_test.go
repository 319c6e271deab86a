package failover

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"revd/bench/internal/revdtest"
)

func kvClient(t *testing.T, endpoint string) pb.KVClient {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewKVClient(conn)
}

// deadEndpoint is a loopback address nothing listens on.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestWriter: writes go to the members in turn without waiting for each
// other; a member that is down fails its share and holds up nothing; the
// first write begun after a mark is found and acknowledged.
func TestWriter(t *testing.T) {
	live, dead := kvClient(t, revdtest.Start(t)), kvClient(t, deadEndpoint(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := Start(ctx, []pb.KVClient{live, dead}, Options{Interval: time.Millisecond, ValSize: 16})
	select {
	case <-w.AckedAfter(time.Now()):
	case <-ctx.Done():
		t.Fatal("no write acknowledged")
	}
	mark := time.Now()
	select {
	case <-w.AckedAfter(mark):
	case <-ctx.Done():
		t.Fatal("no write begun after the mark acknowledged")
	}
	writes := w.Stop()
	out, err := FirstAck(writes, mark)
	if err != nil {
		t.Fatal(err)
	}
	if out.First.Member != 0 || out.Time <= 0 {
		t.Errorf("first ack %+v after %v, want one from the live member", out.First, out.Time)
	}
	refused := 0
	for _, wr := range writes {
		if wr.OK() && wr.Member != 0 {
			t.Errorf("the dead member acknowledged %+v", wr)
		}
		if !wr.OK() && wr.Member == 1 && strings.HasPrefix(wr.Err, "Unavailable: ") {
			refused++
			if strings.Contains(wr.Err, "127.0.0.1:") {
				t.Errorf("address left in %q", wr.Err)
			}
		}
		if wr.End.Before(wr.Start) {
			t.Errorf("a write ended before it began: %+v", wr)
		}
	}
	if refused == 0 {
		t.Errorf("no write to the dead member failed as Unavailable; writes: %d", len(writes))
	}
	// A mark after every write: nothing acknowledged yet, and Stop has
	// ended the writing.
	select {
	case <-w.AckedAfter(time.Now()):
		t.Error("acknowledged after Stop")
	case <-time.After(20 * time.Millisecond):
	}
}

// TestNewLeader: the first member to name a leader other than the old one
// is found, a dead member holding up nothing; with no other leader to
// find, the wait ends with its context.
func TestNewLeader(t *testing.T) {
	ep := revdtest.Start(t)
	mt := func(endpoint string) pb.MaintenanceClient {
		conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return pb.NewMaintenanceClient(conn)
	}
	live, dead := mt(ep), mt(deadEndpoint(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := live.Status(ctx, &pb.StatusRequest{})
	if err != nil || st.Leader == 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	before := time.Now()
	at, lead, err := NewLeader(ctx, []pb.MaintenanceClient{dead, live}, st.Leader+1, 5*time.Millisecond)
	if err != nil || lead != st.Leader || at.Before(before) {
		t.Errorf("NewLeader = %v, %x, %v; want %x seen after %v", at, lead, err, st.Leader, before)
	}
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if _, _, err := NewLeader(short, []pb.MaintenanceClient{dead, live}, st.Leader, 5*time.Millisecond); err == nil {
		t.Error("a leader other than the only one was found")
	}
}
