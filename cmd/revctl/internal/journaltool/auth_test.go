package journaltool

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"revd/journal"
	journalv1 "revd/protos/revd/journal/v1"
	"revd/server"
)

// startAuthServer starts a server on dir with cheap password hashes.
func startAuthServer(t *testing.T, dir string) *server.Server {
	t.Helper()
	s, err := server.New(server.Options{DataDir: dir, BcryptCost: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("server.New(%s): %v", dir, err)
	}
	return s
}

// readAuth reads dir's auth store, and closes it again.
func readAuth(t *testing.T, dir string) journal.AuthState {
	t.Helper()
	j, err := journal.OpenReadOnly(dir, journal.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	st, err := j.Auth()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func sameAuth(a, b journal.AuthState) bool {
	if a.Enabled != b.Enabled || a.Revision != b.Revision || len(a.Users) != len(b.Users) || len(a.Roles) != len(b.Roles) {
		return false
	}
	for i := range a.Users {
		if !proto.Equal(a.Users[i], b.Users[i]) {
			return false
		}
	}
	for i := range a.Roles {
		if !proto.Equal(a.Roles[i], b.Roles[i]) {
			return false
		}
	}
	return true
}

// TestAuthTravels: a directory's auth store (the switch, the auth
// revision, the users with their password hashes, the roles with their
// permissions) goes through export and import, in both formats, and
// rebuild, at any revision, exactly; a server on the new directory has
// authentication on (it does not fail open) and lets the users in with
// their passwords. An export with a prefix leaves it out.
func TestAuthTravels(t *testing.T) {
	dir := t.TempDir()
	s := startAuthServer(t, dir)
	bg := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put(bg, &pb.PutRequest{Key: []byte("app/x"), Value: []byte("1")}))
	must(s.Auth().UserAdd(bg, &pb.AuthUserAddRequest{Name: "root", Password: "rootpw"}))
	must(s.Auth().UserGrantRole(bg, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}))
	must(s.Auth().UserAdd(bg, &pb.AuthUserAddRequest{Name: "alice", Password: "alicepw"}))
	must(s.Auth().UserAdd(bg, &pb.AuthUserAddRequest{Name: "bob", Options: &authpb.UserAddOptions{NoPassword: true}}))
	must(s.Auth().RoleAdd(bg, &pb.AuthRoleAddRequest{Name: "app"}))
	must(s.Auth().RoleGrantPermission(bg, &pb.AuthRoleGrantPermissionRequest{Name: "app",
		Perm: &authpb.Permission{PermType: authpb.READWRITE, Key: []byte("app/"), RangeEnd: []byte("app0")}}))
	must(s.Auth().RoleAdd(bg, &pb.AuthRoleAddRequest{Name: "idle"}))
	must(s.Auth().UserGrantRole(bg, &pb.AuthUserGrantRoleRequest{User: "alice", Role: "app"}))
	must(s.Auth().AuthEnable(bg, &pb.AuthEnableRequest{}))
	root := loginT(t, s, "root", "rootpw")
	must(s.Put(root, &pb.PutRequest{Key: []byte("app/y"), Value: []byte("2")}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := readAuth(t, dir)
	if !want.Enabled || want.Revision < 2 || len(want.Users) != 3 || len(want.Roles) != 2 ||
		!bytes.HasPrefix(want.Users[0].Password, []byte("$2a$04$")) {
		t.Fatalf("the source's auth store is not what the test set up: %+v", want)
	}

	check := func(what, out string) {
		t.Helper()
		if got := readAuth(t, out); !sameAuth(got, want) {
			t.Errorf("%s: auth store %+v, want %+v", what, got, want)
		}
		s := startAuthServer(t, out)
		defer s.Close()
		if _, err := s.Put(bg, &pb.PutRequest{Key: []byte("app/z"), Value: []byte("v")}); err != rpctypes.ErrGRPCUserEmpty {
			t.Errorf("%s: put without a token: %v, want %v", what, err, rpctypes.ErrGRPCUserEmpty)
		}
		alice := loginT(t, s, "alice", "alicepw")
		if _, err := s.Put(alice, &pb.PutRequest{Key: []byte("app/z"), Value: []byte("v")}); err != nil {
			t.Errorf("%s: alice's put: %v", what, err)
		}
		if _, err := s.Put(alice, &pb.PutRequest{Key: []byte("other"), Value: []byte("v")}); err != rpctypes.ErrGRPCPermissionDenied {
			t.Errorf("%s: alice's put outside her role: %v, want %v", what, err, rpctypes.ErrGRPCPermissionDenied)
		}
		if _, err := s.Auth().Authenticate(bg, &pb.AuthenticateRequest{Name: "alice", Password: "wrong"}); err != rpctypes.ErrGRPCAuthFailed {
			t.Errorf("%s: a wrong password: %v, want %v", what, err, rpctypes.ErrGRPCAuthFailed)
		}
	}

	for _, f := range []Format{JSONL, Proto} {
		data := exportDir(t, dir, ExportOptions{Format: f})
		rd, err := NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if a := rd.Header().Auth; a == nil || !sameAuth(*a, want) {
			t.Errorf("%s export: header auth %+v, want %+v", f, a, want)
		}
		out := filepath.Join(t.TempDir(), "imported")
		if _, err := Import(bytes.NewReader(data), out, BuildOptions{}); err != nil {
			t.Fatalf("import %s: %v", f, err)
		}
		if again := exportDir(t, out, ExportOptions{Format: f}); !bytes.Equal(again, data) {
			t.Errorf("%s export of the import differs:\n%q\nwant\n%q", f, head(again), head(data))
		}
		check("import "+f.String(), out)

		pre := exportDir(t, dir, ExportOptions{Format: f, Prefix: []byte("app/")})
		if rd, err := NewReader(bytes.NewReader(pre)); err != nil || rd.Header().Auth != nil {
			t.Errorf("%s export --prefix carries an auth store (%v)", f, err)
		}
	}
	jsonl := string(exportDir(t, dir, ExportOptions{}))
	header, _, _ := strings.Cut(jsonl, "\n")
	if !strings.Contains(header, `,"auth":{"enabled":true,"revision":`) || !strings.Contains(header, `"users_b64":["`) ||
		!strings.HasSuffix(header, `"]}}`) {
		t.Errorf("jsonl header %s: no auth object where doc.go puts it", header)
	}

	j := openRO(t, dir)
	for _, at := range []int64{2, 0} { // before any auth change, and the last
		out := filepath.Join(t.TempDir(), "rebuilt")
		if _, err := Rebuild(j, out, RebuildOptions{AtRev: at}); err != nil {
			t.Fatal(err)
		}
		check("rebuild", out)
	}
}

func loginT(t *testing.T, s *server.Server, user, password string) context.Context {
	t.Helper()
	resp, err := s.Auth().Authenticate(context.Background(), &pb.AuthenticateRequest{Name: user, Password: password})
	if err != nil {
		t.Fatalf("authenticate %s: %v", user, err)
	}
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(rpctypes.TokenFieldNameGRPC, resp.Token))
}

// TestAuthAbsent: an export written before exports carried the auth store
// (this file's bytes are TestExportJSONLSchema's, and the proto header has
// no field 10) still imports, as a directory with authentication off and
// no users; a directory whose auth was never changed exports no auth
// store, so its exports are what they were before.
func TestAuthAbsent(t *testing.T) {
	old := `{"kind":"header","format":"revd-journal-export/v1","cluster_id":4660,"member_id":22136,"snapshot_revision":3,"compact_revision":3,"last_revision":4,"snapshot_keys":2,"prefix_b64":""}
{"kind":"snapshot","key":"a","key_b64":"YQ==","value":"<&>","value_b64":"PCY+","create_revision":2,"mod_revision":3,"version":2,"lease":0}
{"kind":"snapshot","key_b64":"Yv8=","value":"\u0000\u0001","value_b64":"AAE=","create_revision":3,"mod_revision":3,"version":1,"lease":5}
{"kind":"event","revision":4,"type":"DELETE","key":"a","key_b64":"YQ==","value":"","value_b64":"","create_revision":0,"mod_revision":4,"version":0,"lease":0}
`
	oldProto := exportDir(t, smallJournal(t), ExportOptions{Format: Proto})
	if rd, err := NewReader(bytes.NewReader(oldProto)); err != nil || rd.Header().Auth != nil {
		t.Fatalf("proto export of a directory without auth: header auth %v, %v", rd.Header().Auth, err)
	}
	for name, data := range map[string][]byte{"jsonl": []byte(old), "proto": oldProto} {
		out := filepath.Join(t.TempDir(), "imported")
		if _, err := Import(bytes.NewReader(data), out, BuildOptions{}); err != nil {
			t.Fatalf("import %s: %v", name, err)
		}
		if st := readAuth(t, out); !sameAuth(st, journal.AuthState{}) {
			t.Errorf("import %s: auth store %+v, want none", name, st)
		}
		s := startAuthServer(t, out)
		if s.AuthEnabled() {
			t.Errorf("import %s: authentication is on", name)
		}
		if st, err := s.Auth().AuthStatus(ctx, &pb.AuthStatusRequest{}); err != nil || st.AuthRevision != 1 {
			t.Errorf("import %s: auth status %v, %v; want revision 1", name, st, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// The server made the store's revision 1: still nothing to export.
		if again := exportDir(t, out, ExportOptions{Format: map[string]Format{"jsonl": JSONL, "proto": Proto}[name]}); !bytes.Equal(again, data) {
			t.Errorf("%s export after a server opened the import differs:\n%q\nwant\n%q", name, head(again), head(data))
		}
	}
}

// Import refuses an auth store that does not decode or that Auth could
// not have returned, in either format.
func TestImportRefusesBadAuth(t *testing.T) {
	dir := smallJournal(t)
	good := string(exportDir(t, dir, ExportOptions{}))
	header, rest, _ := strings.Cut(good, "\n")
	withAuth := func(auth string) string {
		return strings.TrimSuffix(header, "}") + `,"auth":` + auth + "}\n" + rest
	}
	userB64 := func(name string) string {
		b, _ := proto.Marshal(&authpb.User{Name: []byte(name), Password: []byte("$2a$04$x")})
		return `"` + base64.StdEncoding.EncodeToString(b) + `"`
	}
	goodProto := exportDir(t, dir, ExportOptions{Format: Proto})
	withProtoAuth := func(a *journalv1.ExportAuth) string {
		v, n := protowire.ConsumeVarint(goodProto)
		hlen := int(v)
		var ph journalv1.ExportHeader
		if err := proto.Unmarshal(goodProto[n:n+hlen], &ph); err != nil {
			t.Fatal(err)
		}
		ph.Auth = a
		b, err := proto.Marshal(&ph)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := (&protoEncoder{w: &out}).write(b); err != nil {
			t.Fatal(err)
		}
		return out.String() + string(goodProto[n+hlen:])
	}
	tests := []struct {
		name, file, want string
	}{
		{"jsonl users out of order", withAuth(`{"enabled":true,"revision":5,"users_b64":[` + userB64("root") + `,` + userB64("alice") + `]}`),
			`user "alice" is not after "root"`},
		{"jsonl user twice", withAuth(`{"enabled":true,"revision":5,"users_b64":[` + userB64("a") + `,` + userB64("a") + `]}`),
			`user "a" is not after "a"`},
		{"jsonl user without a name", withAuth(`{"enabled":false,"revision":5,"users_b64":[""]}`), "user 1 has no name"},
		{"jsonl not base64", withAuth(`{"enabled":false,"revision":5,"roles_b64":["%%"]}`), "header: auth: role 1: illegal base64"},
		{"jsonl not a user", withAuth(`{"enabled":false,"revision":5,"users_b64":["/w=="]}`), "header: auth: user 1:"},
		{"jsonl unknown field", withAuth(`{"enabled":false,"revision":5,"tokens":[]}`), `unknown field "tokens"`},
		{"proto role twice", withProtoAuth(&journalv1.ExportAuth{Revision: 3, Roles: [][]byte{
			mustMarshal(t, &authpb.Role{Name: []byte("r")}), mustMarshal(t, &authpb.Role{Name: []byte("r")})}}),
			`role "r" is not after "r"`},
		{"proto not a role", withProtoAuth(&journalv1.ExportAuth{Revision: 3, Roles: [][]byte{{0xff}}}), "header: auth: role 1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			_, err := Import(strings.NewReader(tt.file), filepath.Join(parent, "out"), BuildOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Import error = %v, want one containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrBadExport) {
				t.Errorf("Import error = %v, want ErrBadExport", err)
			}
		})
	}
	// The same shapes, well formed, import.
	ok := withAuth(`{"enabled":false,"revision":5,"users_b64":[` + userB64("alice") + `,` + userB64("root") + `]}`)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Import(strings.NewReader(ok), out, BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := readAuth(t, out); st.Revision != 5 || len(st.Users) != 2 || string(st.Users[1].Name) != "root" {
		t.Errorf("imported auth store %+v", st)
	}
	if again := string(exportDir(t, out, ExportOptions{})); again != ok {
		t.Errorf("export of the import:\n%s\nwant\n%s", again, ok)
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
