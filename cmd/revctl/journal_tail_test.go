package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	"revd/internal/testutil/syncbuf"
	"revd/server"
)

// TestJournalTail: tail --from streams the history from that revision, then
// the live writes, as export's jsonl event lines, until interrupted.
func TestJournalTail(t *testing.T) {
	s, err := server.New(server.Options{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	put := func(k, v string) {
		if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "1") // 2
	put("b", "1") // 3
	h := natsapitest.Start(t, s, s.Maintenance().Status, natsapi.Options{Watch: s})
	client := natsclient.New(h.Conn, natsclient.Options{})

	var out, errb syncbuf.Buffer
	stop, cancel := context.WithCancel(ctx)
	r := &runner{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, interrupt: stop,
		connect: func(globalFlags) (kvClient, func(), error) { return client, func() {}, nil }}
	done := make(chan int, 1)
	go func() { done <- r.run([]string{"journal", "tail", "--from", "3"}) }()

	want := []string{
		`{"kind":"event","revision":3,"type":"PUT","key":"b","key_b64":"Yg==","value":"1","value_b64":"MQ==","create_revision":3,"mod_revision":3,"version":1,"lease":0}`,
		`{"kind":"event","revision":4,"type":"PUT","key":"a","key_b64":"YQ==","value":"2","value_b64":"Mg==","create_revision":2,"mod_revision":4,"version":2,"lease":0}`,
		`{"kind":"event","revision":5,"type":"DELETE","key":"b","key_b64":"Yg==","value":"","value_b64":"","create_revision":0,"mod_revision":5,"version":0,"lease":0}`,
	}
	waitLines := func(n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(out.String(), "\n") < n {
			if time.Now().After(deadline) {
				t.Fatalf("tail printed %q (stderr %q), want %d lines", out.String(), errb.String(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitLines(1)
	put("a", "2")                                                                           // 4
	if _, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("b")}); err != nil { // 5
		t.Fatal(err)
	}
	waitLines(3)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("tail exit %d, stderr %q", code, errb.String())
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tail printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
