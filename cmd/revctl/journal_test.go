package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/client/natsclient"
	"revd/gateway/natsapi"
	"revd/gateway/natsapi/natsapitest"
	"revd/server"
)

// runCLI runs one revctl command line with stdin, against client (nil: no
// connection expected).
func runCLI(t *testing.T, client kvClient, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	r := &runner{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		connect: func(globalFlags) (kvClient, func(), error) {
			if client == nil {
				t.Fatalf("revctl %q connected to NATS", args)
			}
			return client, func() {}, nil
		},
	}
	code = r.run(args)
	return out.String(), errb.String(), code
}

// serverDir writes a small history through a server at dir, compacted at
// revision 4, closes it and returns the last revision.
func serverDir(t *testing.T, dir string) int64 {
	t.Helper()
	s, err := server.New(server.Options{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return writeHistory(t, s)
}

func writeHistory(t *testing.T, s *server.Server) int64 {
	t.Helper()
	ctx := context.Background()
	var last int64
	for i := range 8 {
		resp, err := s.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k%d", i%5), Value: fmt.Appendf(nil, "v%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
		if last == 4 {
			if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: 4, Physical: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("k1")})
	if err != nil {
		t.Fatal(err)
	}
	return max(last, resp.Header.Revision)
}

var hashLine = regexp.MustCompile(`state hash at revision (\d+): ([0-9a-f]{64}) \((\d+) keys\)`)

func TestJournalOffline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	last := serverDir(t, dir) // revisions 2..9, then the delete at 10; compacted at 4, so base 3
	if last != 10 {
		t.Fatalf("history ends at %d, want 10", last)
	}

	out, _, code := runCLI(t, nil, "", "journal", "stats", "--data-dir", dir)
	for _, want := range []string{"first revision:   4\n", "last revision:    10\n", "compact revision: 4\n",
		"base revision:    3\n", "keys:             4 (alive at revision 10)\n", "records:          7\n", "events:           7\n", "base keys:        2\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("stats (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
	out, _, _ = runCLI(t, nil, "", "journal", "stats", "--data-dir", dir, "-w", "json")
	var st struct{ Keys, Records int64 }
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Keys != 4 || st.Records != 7 {
		t.Errorf("stats -w json = %s (%v)", out, err)
	}

	verified, _, code := runCLI(t, nil, "", "journal", "verify", "--data-dir", dir)
	m := hashLine.FindStringSubmatch(verified)
	if code != 0 || !strings.HasPrefix(verified, "ok: 7 records (revisions 4 to 10), 2 base entries (base revision 3), compact revision 4\n") ||
		m == nil || m[1] != "10" || m[3] != "4" {
		t.Errorf("verify: exit %d\n%s", code, verified)
	}

	for _, format := range []string{"jsonl", "proto"} {
		export, stderr, code := runCLI(t, nil, "", "journal", "export", "--data-dir", dir, "--format", format, "--progress")
		if code != 0 || len(export) == 0 {
			t.Fatalf("export --format %s: exit %d, %s", format, code, stderr)
		}
		if !strings.Contains(stderr, "export [") || !strings.Contains(stderr, "export done: 7 records, 7 events") {
			t.Errorf("export --progress wrote %q to stderr", stderr)
		}
		imported := filepath.Join(t.TempDir(), "imported")
		out, stderr, code := runCLI(t, nil, export, "journal", "import", "-", "--out", imported)
		if code != 0 || !strings.HasPrefix(out, "imported "+imported+" at revision 10 (compact revision 4, base revision 3)") {
			t.Fatalf("import: exit %d\n%s%s", code, out, stderr)
		}
		if got := hashLine.FindStringSubmatch(out); got == nil || got[2] != m[2] {
			t.Errorf("import's state hash %q, verify's %q", got, m)
		}
		again, _, _ := runCLI(t, nil, "", "journal", "export", "--data-dir", imported, "--format", format)
		if again != export {
			t.Errorf("%s export of the import differs from the original export", format)
		}
	}

	rebuilt := filepath.Join(t.TempDir(), "rebuilt")
	out, _, code = runCLI(t, nil, "", "journal", "rebuild", "--data-dir", dir, "--out", rebuilt, "--at-rev", "7")
	if code != 0 || !strings.HasPrefix(out, "rebuilt "+rebuilt+" at revision 7 (compact revision 4, base revision 3): 2 snapshot keys, 4 records, 4 events\n") {
		t.Errorf("rebuild: exit %d\n%s", code, out)
	}
	if _, _, code := runCLI(t, nil, "", "journal", "verify", "--data-dir", rebuilt); code != 0 {
		t.Errorf("verify of the rebuilt directory: exit %d", code)
	}

	// Damage a record: verify names it and exits 1.
	rec := binary.BigEndian.AppendUint64([]byte{'r'}, 6)
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Get(rec)
	if err != nil {
		t.Fatal(err)
	}
	v = bytes.Clone(v)
	closer.Close()
	v[len(v)-1] ^= 0x20
	if err := db.Set(rec, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, _, code = runCLI(t, nil, "", "journal", "verify", "--data-dir", dir)
	if code != 1 || !strings.HasPrefix(out, "revision 6: checksum mismatch") ||
		!strings.Contains(out, "1 problem found in "+dir+" (7 records (revisions 4 to 10)); the state could be rebuilt up to revision 5 only") {
		t.Errorf("verify of a damaged journal: exit %d\n%s", code, out)
	}
	if _, stderr, code := runCLI(t, nil, "", "journal", "export", "--data-dir", dir); code != 1 || !strings.Contains(stderr, "record 6") {
		t.Errorf("export of a damaged journal: exit %d, %q", code, stderr)
	}
}

// Usage errors and unreadable inputs exit 2, with a message.
func TestJournalUsage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	serverDir(t, dir)
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		args []string
		want string
	}{
		{args("journal", "verify"), "needs --data-dir"},
		{args("journal", "verify", "--data-dir", missing), "is not a revd data directory"},
		{args("journal", "export", "--data-dir", dir, "--out", "x"), "unknown flag for journal export: --out"},
		{args("journal", "export", "--data-dir", dir, "--bogus"), "unknown flag: --bogus"},
		{args("journal", "export", "--data-dir", dir, "--format", "xml"), "unknown export format"},
		{args("journal", "export", "--data-dir", dir, "--from", "3"), "folded into the base snapshot"},
		{args("journal", "frob"), `unknown command "frob"`},
		{args("journal", "tail", "extra"), "takes no arguments"},
		{args("journal", "import", "--out", "x"), "needs one argument"},
		{args("journal", "import", filepath.Join(missing, "f"), "--out", "x"), "no such file"},
		{args("journal", "rebuild", "--data-dir", dir), "needs --out"},
		{args("journal", "rebuild", "--data-dir", dir, "--out", dir), "not empty"},
		{args("journal", "stats", "--data-dir", dir, "-w", "table"), "simple or json"},
	}
	for _, tt := range tests {
		_, stderr, code := runCLI(t, nil, "", tt.args...)
		if code != exitJournalUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("revctl %q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	out, _, code := runCLI(t, nil, "", "journal")
	if code != 0 || !strings.Contains(out, "revctl journal export --data-dir DIR") {
		t.Errorf("revctl journal: exit %d\n%s", code, out)
	}
}

// checkpoint and hash ask a running server over NATS; the checkpoint is a
// directory the offline commands read, with the server's state hash.
func TestJournalOnline(t *testing.T) {
	dir := t.TempDir()
	s, err := server.New(server.Options{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeHistory(t, s)
	h := natsapitest.Start(t, s, s.Maintenance().Status, natsapi.Options{SubjectPrefix: "j1", Maintenance: s.Maintenance(), Cluster: s.Cluster()})
	client := natsclient.New(h.Conn, natsclient.Options{SubjectPrefix: "j1"})

	// The running server's directory is locked.
	if _, stderr, code := runCLI(t, nil, "", "journal", "verify", "--data-dir", dir); code != exitJournalUsage ||
		!strings.Contains(stderr, "a running revd holds its lock") {
		t.Errorf("verify of a running server's directory: exit %d, %q", code, stderr)
	}

	hashed, _, code := runCLI(t, client, "", "--subject-prefix", "j1", "journal", "hash")
	if code != 0 || !strings.HasPrefix(hashed, "state hash at revision 10: ") {
		t.Fatalf("hash: exit %d\n%s", code, hashed)
	}
	old, _, _ := runCLI(t, client, "", "journal", "hash", "--rev", "6")
	if !strings.HasPrefix(old, "state hash at revision 6: ") || old == hashed {
		t.Errorf("hash --rev 6 = %q", old)
	}
	if _, stderr, code := runCLI(t, client, "", "journal", "hash", "--rev", "2"); code != 1 || !strings.Contains(stderr, "compacted") {
		t.Errorf("hash of a compacted revision: exit %d, %q", code, stderr)
	}

	// A relative directory is made absolute against revctl's working
	// directory.
	work := t.TempDir()
	t.Chdir(work)
	out, stderr, code := runCLI(t, client, "", "journal", "checkpoint", "cp")
	cp := filepath.Join(work, "cp")
	if code != 0 || out != "checkpoint written to "+cp+" at revision 10 (compact revision 4, base revision 3)\n" {
		t.Fatalf("checkpoint: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := s.Put(context.Background(), &pb.PutRequest{Key: []byte("later"), Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	verified, _, code := runCLI(t, nil, "", "journal", "verify", "--data-dir", cp)
	if code != 0 || !strings.Contains(verified, hashed) {
		t.Errorf("verify of the checkpoint: exit %d\n%s\nwant the server's line %q", code, verified, hashed)
	}
	if _, stderr, code := runCLI(t, client, "", "journal", "checkpoint", cp); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Errorf("checkpoint into an existing directory: exit %d, %q", code, stderr)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 1 {
		t.Errorf("work directory holds %d entries", len(entries))
	}
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestJournalRestoreClusterFlags: restore's cluster flags are checked as
// revd checks its own, before anything is read or written: usage errors
// (exit 2) naming the flag.
func TestJournalRestoreClusterFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(file, []byte("not read"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--initial-cluster", "m1"}, "--initial-cluster"},
		{[]string{"--name", "m2", "--initial-cluster", "m1=http://127.0.0.1:2380"}, `couldn't find local name "m2"`},
		{[]string{"--name", "m1", "--initial-cluster", "m1=http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2381"},
			"missing from --initial-advertise-peer-urls"},
	} {
		out := filepath.Join(t.TempDir(), "restored")
		_, stderr, code := runCLI(t, nil, "", append([]string{"journal", "restore", file, "--out", out}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("restore %q: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("restore %q wrote %s", tc.args, out)
		}
	}
}
