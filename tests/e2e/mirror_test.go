package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"revd/tests/testutil"
)

// TestEtcdctlMakeMirror: `etcdctl make-mirror` copies a prefix from one
// server to another, first the keys already there, then every change as it
// comes (its watch), with the same results whether the two servers are
// etcd 3.7.3's or the target's.
func TestEtcdctlMakeMirror(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	ctl := mustEtcdctl(t)
	mirror := func(k string) string {
		src, dst := testutil.Start(t, k, testutil.Options{}), testutil.Start(t, k, testutil.Options{})
		etcdctl(t, ctl, src.Endpoint, "", "put", "m/before", "1")
		etcdctl(t, ctl, src.Endpoint, "", "put", "other", "x")
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, ctl, "--endpoints", src.Endpoint, "make-mirror", "--prefix", "m/", dst.Endpoint)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		defer func() { cancel(); cmd.Wait() }() // make-mirror runs until killed
		etcdctl(t, ctl, src.Endpoint, "", "put", "m/after", "2")
		etcdctl(t, ctl, src.Endpoint, "", "del", "m/before")
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := etcdctl(t, ctl, dst.Endpoint, "", "get", "--prefix", "", "--keys-only").Stdout
			if strings.Contains(got, "m/after") && !strings.Contains(got, "before") || time.Now().After(deadline) {
				return got
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	want, got := mirror(testutil.KindEtcd), mirror(kind)
	if want != "m/after\n\n" {
		t.Fatalf("etcd's mirror holds %q; the test's expectation is wrong", want)
	}
	if got != want {
		t.Errorf("%s's mirror holds %q, etcd's %q", kind, got, want)
	}
}
