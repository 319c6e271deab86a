package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/authpb"
	"google.golang.org/protobuf/proto"
)

func user(name string, roles ...string) *authpb.User {
	return &authpb.User{Name: []byte(name), Password: []byte("$2a$04$hash"), Roles: roles, Options: &authpb.UserAddOptions{}}
}

func role(name, key string) *authpb.Role {
	return &authpb.Role{Name: []byte(name), KeyPermission: []*authpb.Permission{{PermType: authpb.READWRITE, Key: []byte(key)}}}
}

func equalAuth(t *testing.T, got, want AuthState) {
	t.Helper()
	same := got.Enabled == want.Enabled && got.Revision == want.Revision &&
		len(got.Users) == len(want.Users) && len(got.Roles) == len(want.Roles)
	for i := 0; same && i < len(got.Users); i++ {
		same = proto.Equal(got.Users[i], want.Users[i])
	}
	for i := 0; same && i < len(got.Roles); i++ {
		same = proto.Equal(got.Roles[i], want.Roles[i])
	}
	if !same {
		t.Fatalf("auth state %+v, want %+v", got, want)
	}
}

// TestAuthDurable: auth changes are read back after a reopen, users and
// roles in name order; later changes win; deletes remove.
func TestAuthDurable(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	st, err := j.Auth()
	if err != nil {
		t.Fatal(err)
	}
	equalAuth(t, st, AuthState{})
	on, rev, rev2 := true, uint64(1), uint64(7)
	if err := changeAuth(j, []AuthChange{
		{Revision: &rev}, {PutUser: user("root", "root")}, {PutUser: user("alice")}, {PutRole: role("reader", "k")},
		{PutRole: role("writer", "w")}, {Enabled: &on}, {Revision: &rev2}, {PutUser: user("alice", "reader")},
	}); err != nil {
		t.Fatal(err)
	}
	closeT(t, j)
	j = openT(t, dir)
	want := AuthState{Enabled: true, Revision: 7, Users: []*authpb.User{user("alice", "reader"), user("root", "root")},
		Roles: []*authpb.Role{role("reader", "k"), role("writer", "w")}}
	st, err = j.Auth()
	if err != nil {
		t.Fatal(err)
	}
	equalAuth(t, st, want)
	off := false
	if err := changeAuth(j, []AuthChange{{DeleteUser: "alice"}, {DeleteRole: "writer"}, {Enabled: &off}}); err != nil {
		t.Fatal(err)
	}
	st, err = j.Auth()
	if err != nil {
		t.Fatal(err)
	}
	equalAuth(t, st, AuthState{Revision: 7, Users: want.Users[1:], Roles: want.Roles[:1]})
	if err := changeAuth(j, []AuthChange{{}}); err == nil {
		t.Fatal("an empty change was accepted")
	}
	if err := changeAuth(j, []AuthChange{{PutUser: &authpb.User{}}}); err == nil {
		t.Fatal("a user without a name was accepted")
	}
	closeT(t, j)
}

// TestAuthDamage: a flipped byte, a value under another key, an unknown
// key or a bad flag is ErrCorrupt naming the entry.
func TestAuthDamage(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, db *pebble.DB)
	}{
		{"flipped byte", func(t *testing.T, db *pebble.DB) {
			k := []byte("a/u/root")
			v := rawGet(t, db, k)
			v[len(v)-1] ^= 1
			rawSet(t, db, k, v)
		}},
		{"moved value", func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, []byte("a/u/eve"), rawGet(t, db, []byte("a/u/root")))
		}},
		{"unknown key", func(t *testing.T, db *pebble.DB) {
			k := []byte("a/x")
			rawSet(t, db, k, authValue(k, []byte{1}))
		}},
		{"bad flag", func(t *testing.T, db *pebble.DB) {
			rawSet(t, db, keyAuthEnabled, authValue(keyAuthEnabled, []byte{2}))
		}},
		{"name mismatch", func(t *testing.T, db *pebble.DB) {
			k := []byte("a/u/eve")
			b, _ := proto.Marshal(user("root"))
			rawSet(t, db, k, authValue(k, b))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			j := openT(t, dir)
			on := true
			if err := changeAuth(j, []AuthChange{{PutUser: user("root", "root")}, {Enabled: &on}}); err != nil {
				t.Fatal(err)
			}
			closeT(t, j)
			rawEdit(t, dir, func(db *pebble.DB) { tc.edit(t, db) })
			j = openT(t, dir)
			defer closeT(t, j)
			if _, err := j.Auth(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Auth: %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestLoaderAuth: a Loader writes the auth store ChangeAuth would have
// written, and refuses one Auth could not have returned.
func TestLoaderAuth(t *testing.T) {
	want := AuthState{Enabled: true, Revision: 9, Users: []*authpb.User{user("alice", "reader"), user("root", "root")},
		Roles: []*authpb.Role{role("reader", "k"), role("root", "")}}
	out := filepath.Join(t.TempDir(), "out")
	l, err := NewLoader(out, LoadMeta{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddAuth(want); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	j := openT(t, out)
	st, err := j.Auth()
	if err != nil {
		t.Fatal(err)
	}
	equalAuth(t, st, want)
	closeT(t, j)

	for _, tt := range []struct {
		name string
		feed func(l *Loader) error
		want string
	}{
		{"twice", func(l *Loader) error {
			if err := l.AddAuth(AuthState{Revision: 2}); err != nil {
				return err
			}
			return l.AddAuth(AuthState{Revision: 3})
		}, "added twice"},
		{"users out of order", func(l *Loader) error {
			return l.AddAuth(AuthState{Users: []*authpb.User{user("root"), user("alice")}})
		}, `user "alice" is not after "root"`},
		{"user twice", func(l *Loader) error {
			return l.AddAuth(AuthState{Users: []*authpb.User{user("alice"), user("alice")}})
		}, `user "alice" is not after "alice"`},
		{"role twice", func(l *Loader) error {
			return l.AddAuth(AuthState{Roles: []*authpb.Role{role("a", "k"), role("b", "k"), role("b", "j")}})
		}, `role "b" is not after "b"`},
		{"user without a name", func(l *Loader) error {
			return l.AddAuth(AuthState{Users: []*authpb.User{user("alice"), {Password: []byte("$2a$04$hash")}}})
		}, "user 2 has no name"},
		{"nil role", func(l *Loader) error {
			return l.AddAuth(AuthState{Roles: []*authpb.Role{nil}})
		}, "role 1 has no name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			l, err := NewLoader(filepath.Join(parent, "out"), LoadMeta{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = tt.feed(l)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if _, err := l.Finish(); err == nil {
				t.Fatal("Finish after a refused AddAuth succeeded")
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("a refused load left %d entries in the parent", len(entries))
			}
		})
	}
}
