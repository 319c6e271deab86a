package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

// TestSnapshotStreamShape reads Maintenance.Snapshot from a fresh etcd and
// a fresh target, each holding the same 300 KiB of keys, and checks that
// both streams have etcd's shape: 32 KiB blobs, each with the bytes still
// to come and the storage version and no header, then one message with
// the SHA-256 of everything before it; the whole a multiple of 512 bytes
// and 32, which etcdctl checks.
func TestSnapshotStreamShape(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	for _, p := range []*testutil.Proc{testutil.StartEtcd(t, testutil.Options{}), testutil.Start(t, kind, testutil.Options{})} {
		c := p.Dial(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := range 300 {
			if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "key-%03d", i), Value: bytes.Repeat([]byte{byte(i)}, 1024)}); err != nil {
				t.Fatal(err)
			}
		}
		st, err := c.Maintenance.Snapshot(ctx, &pb.SnapshotRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []*pb.SnapshotResponse
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: Snapshot: %v", p.Kind, err)
			}
			msgs = append(msgs, m)
		}
		if len(msgs) < 3 {
			t.Fatalf("%s: %d messages, want the data in several and the SHA-256", p.Kind, len(msgs))
		}
		h := sha256.New()
		data := msgs[:len(msgs)-1]
		var total int
		for _, m := range data {
			total += len(m.Blob)
		}
		left := total
		for i, m := range data {
			left -= len(m.Blob)
			if m.Header != nil || m.Version != "3.7.0" || m.RemainingBytes != uint64(left) || (i < len(data)-1 && len(m.Blob) != 32<<10) {
				t.Fatalf("%s: message %d of %d: header %v, version %q, remaining %d (want %d), blob of %d bytes",
					p.Kind, i, len(msgs), m.Header, m.Version, m.RemainingBytes, left, len(m.Blob))
			}
			h.Write(m.Blob)
		}
		last := msgs[len(msgs)-1]
		if !proto.Equal(last, &pb.SnapshotResponse{Blob: h.Sum(nil), Version: "3.7.0"}) {
			t.Errorf("%s: last message %v, want the SHA-256 of the %d bytes before it", p.Kind, last, total)
		}
		if total%512 != 0 {
			t.Errorf("%s: %d bytes of data, not a multiple of 512", p.Kind, total)
		}
	}
}

// TestSnapshotSaveRestore backs revd up with an unmodified "etcdctl
// snapshot save", restores the file with "revctl journal restore", and
// starts revd on the restored directory: it serves exactly what the
// original served at the snapshot's revision, and nothing written after.
// A damaged file restores nothing.
func TestSnapshotSaveRestore(t *testing.T) {
	if testutil.TargetKind(t, TargetEnv) != testutil.KindRevd {
		t.Skip("revd's restore; etcd's snapshots restore with etcdutl")
	}
	_, ctl := testutil.EtcdBin(t)
	src := testutil.StartRevd(t, testutil.Options{})
	c := src.Dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 200 {
		if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k%03d", i%150), Value: bytes.Repeat([]byte{byte(i)}, 700)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.KV.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("k00"), RangeEnd: []byte("k01")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV.Compact(ctx, &pb.CompactionRequest{Revision: 120, Physical: true}); err != nil {
		t.Fatal(err)
	}
	all := &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}
	before, err := c.KV.Range(ctx, all)
	if err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "backup.db")
	saved := etcdctl(t, ctl, src.Endpoint, "", "snapshot", "save", file)
	if saved.Exit != 0 || !strings.Contains(saved.Stdout, "Snapshot saved at "+file) {
		t.Fatalf("etcdctl snapshot save:\n%s", saved)
	}
	if _, err := c.KV.Put(ctx, &pb.PutRequest{Key: []byte("after"), Value: []byte("the snapshot")}); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "restored.revd")
	out, code := revctl(t, "journal", "restore", file, "--out", dir)
	want := fmt.Sprintf("restored %s at revision %d (compact revision 120, base revision 119)\n", dir, before.Header.Revision)
	if code != 0 || out != want {
		t.Fatalf("revctl journal restore: exit %d, output %q; want 0, %q", code, out, want)
	}
	dst := testutil.StartRevd(t, testutil.Options{DataDir: dir})
	after, err := dst.Dial(t).KV.Range(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Revision != before.Header.Revision || after.Count != before.Count || !slices.EqualFunc(after.Kvs, before.Kvs, func(a, b *mvccpb.KeyValue) bool { return proto.Equal(a, b) }) {
		t.Fatalf("the restored revd serves revision %d, %d keys; the original served revision %d, %d keys at the snapshot",
			after.Header.Revision, after.Count, before.Header.Revision, before.Count)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 1
	bad := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = revctl(t, "journal", "restore", bad, "--out", filepath.Join(t.TempDir(), "x"))
	if code != 1 || !strings.Contains(out, "not a revd snapshot, or a damaged one") {
		t.Errorf("restore of a damaged file: exit %d, output %q", code, out)
	}
}

// revctl runs the revctl binary and returns its combined output and exit
// code.
func revctl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testutil.RevctlBin(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	code := exitCode(t, cmd)
	return out.String(), code
}
