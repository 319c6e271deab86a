package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/authpb"
	"google.golang.org/protobuf/proto"
)

// The auth store (etcd's users, roles, whether authentication is on and the
// auth revision) lives under "a/" (see the layout in doc.go), as etcd keeps
// it in its auth, authUsers and authRoles buckets:
//
//	key                  value
//	-------------------  ------------------------------------------------
//	"a/enabled"          CRC (4B) | 1 byte: 1 on, 0 off
//	"a/revision"         CRC (4B) | 8 bytes big-endian: the auth revision
//	"a/r/" + role name   CRC (4B) | proto.Marshal of etcd's authpb.Role
//	"a/u/" + user name   CRC (4B) | proto.Marshal of etcd's authpb.User
//
// Each CRC is CRC-32C (Castagnoli), big-endian, over the key followed by
// the rest of the value, so a value under the wrong key fails the check. A
// user's password is the bcrypt hash etcd stores, never the password. The
// auth store is not versioned by revision: like leases and alarms, etcd
// changes it without a new revision. Absent keys are etcd's zero values (a
// fresh store: off, revision 0, no users, no roles).
const (
	authPrefix     = "a/"
	authUserPrefix = "a/u/"
	authRolePrefix = "a/r/"
)

var (
	keyAuthEnabled  = []byte("a/enabled")
	keyAuthRevision = []byte("a/revision")
)

// AuthState is the durable auth store.
type AuthState struct {
	Enabled  bool
	Revision uint64
	Users    []*authpb.User // in name order
	Roles    []*authpb.Role // in name order
}

// AuthChange is one change to the auth store; Apply lists them in order.
// Exactly one field is set (Enabled and Revision are pointers for that).
type AuthChange struct {
	Enabled    *bool
	Revision   *uint64
	PutUser    *authpb.User
	DeleteUser string
	PutRole    *authpb.Role
	DeleteRole string
}

func authValue(key, payload []byte) []byte {
	v := make([]byte, crcLen, crcLen+len(payload))
	v = append(v, payload...)
	binary.BigEndian.PutUint32(v, crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, payload))
	return v
}

// authPayload checks v's CRC against key and returns its payload. Errors
// wrap ErrCorrupt.
func authPayload(key, v []byte) ([]byte, error) {
	if len(v) < crcLen {
		return nil, fmt.Errorf("%w: auth entry %q: value of %d bytes", ErrCorrupt, key, len(v))
	}
	stored := binary.BigEndian.Uint32(v)
	if computed := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, v[crcLen:]); stored != computed {
		return nil, fmt.Errorf("%w: auth entry %q: checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, key, stored, computed)
	}
	return v[crcLen:], nil
}

// ChangeAuth records changes to the durable auth store when the batch
// commits, after whatever the batch already holds. An empty or malformed
// change fails the batch.
func (b *Batch) ChangeAuth(changes []AuthChange) {
	if len(changes) == 0 {
		return
	}
	b.op(func() error {
		if err := setAuth(b.pb, changes); err != nil {
			return fmt.Errorf("journal: auth: %w", err)
		}
		return nil
	})
}

// setAuth writes changes into b. It is the one writer of the a/ keys:
// Batch.ChangeAuth and Loader.AddAuth both use it.
func setAuth(b *pebble.Batch, changes []AuthChange) error {
	for _, c := range changes {
		var err error
		switch {
		case c.Enabled != nil:
			on := byte(0)
			if *c.Enabled {
				on = 1
			}
			err = b.Set(keyAuthEnabled, authValue(keyAuthEnabled, []byte{on}), nil)
		case c.Revision != nil:
			err = b.Set(keyAuthRevision, authValue(keyAuthRevision, binary.BigEndian.AppendUint64(nil, *c.Revision)), nil)
		case c.PutUser != nil:
			err = putAuthProto(b, authUserPrefix, c.PutUser.Name, c.PutUser)
		case c.DeleteUser != "":
			err = b.Delete([]byte(authUserPrefix+c.DeleteUser), nil)
		case c.PutRole != nil:
			err = putAuthProto(b, authRolePrefix, c.PutRole.Name, c.PutRole)
		case c.DeleteRole != "":
			err = b.Delete([]byte(authRolePrefix+c.DeleteRole), nil)
		default:
			err = errors.New("empty change")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Check reports whether st is a state Auth could return: no nil user or
// role, every name non-empty, users and roles each in strictly increasing
// name order (bytewise, the order of their keys), so no name twice.
// References are not checked: etcd lets a user hold the root role without
// a role of that name.
func (st AuthState) Check() error {
	var last []byte
	for i, u := range st.Users {
		switch {
		case u == nil || len(u.Name) == 0:
			return fmt.Errorf("journal: auth: user %d has no name", i+1)
		case i > 0 && bytes.Compare(u.Name, last) <= 0:
			return fmt.Errorf("journal: auth: user %q is not after %q (users are in name order, each once)", u.Name, last)
		}
		last = u.Name
	}
	for i, r := range st.Roles {
		switch {
		case r == nil || len(r.Name) == 0:
			return fmt.Errorf("journal: auth: role %d has no name", i+1)
		case i > 0 && bytes.Compare(r.Name, last) <= 0:
			return fmt.Errorf("journal: auth: role %q is not after %q (roles are in name order, each once)", r.Name, last)
		}
		last = r.Name
	}
	return nil
}

// changes are the changes that write st into an empty auth store.
func (st AuthState) changes() []AuthChange {
	cs := make([]AuthChange, 0, 2+len(st.Users)+len(st.Roles))
	cs = append(cs, AuthChange{Enabled: &st.Enabled}, AuthChange{Revision: &st.Revision})
	for _, u := range st.Users {
		cs = append(cs, AuthChange{PutUser: u})
	}
	for _, r := range st.Roles {
		cs = append(cs, AuthChange{PutRole: r})
	}
	return cs
}

func putAuthProto(b *pebble.Batch, prefix string, name []byte, m proto.Message) error {
	if len(name) == 0 {
		return errors.New("a user or role without a name")
	}
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return err
	}
	key := append([]byte(prefix), name...)
	return b.Set(key, authValue(key, payload), nil)
}

// Auth reads the durable auth store. A damaged entry is an error wrapping
// ErrCorrupt.
func (j *Journal) Auth() (AuthState, error) {
	if err := j.life.enter(); err != nil {
		return AuthState{}, err
	}
	defer j.life.exit()
	st, err := j.auth()
	return st, j.corrupt(err)
}

func (j *Journal) auth() (AuthState, error) {
	var st AuthState
	it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: []byte(authPrefix), UpperBound: []byte{authPrefix[0], authPrefix[1] + 1}})
	if err != nil {
		return st, readErr("read the auth store", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := decodeAuthEntry(it.Key(), it.Value(), &st); err != nil {
			return AuthState{}, err
		}
	}
	if err := it.Error(); err != nil {
		return AuthState{}, readErr("read the auth store", err)
	}
	return st, nil
}

// decodeAuthEntry checks the auth entry (key, v) and adds it to st. Errors
// wrap ErrCorrupt.
func decodeAuthEntry(key, v []byte, st *AuthState) error {
	payload, err := authPayload(key, v)
	if err != nil {
		return err
	}
	switch k := string(key); {
	case k == string(keyAuthEnabled):
		if len(payload) != 1 || payload[0] > 1 {
			return fmt.Errorf("%w: auth entry %q: bad value %x", ErrCorrupt, key, payload)
		}
		st.Enabled = payload[0] == 1
	case k == string(keyAuthRevision):
		if len(payload) != 8 {
			return fmt.Errorf("%w: auth entry %q: value of %d bytes", ErrCorrupt, key, len(payload))
		}
		st.Revision = binary.BigEndian.Uint64(payload)
	case len(k) > len(authUserPrefix) && k[:len(authUserPrefix)] == authUserPrefix:
		u := new(authpb.User)
		if err := decodeAuthProto(key, payload, u, u.GetName); err != nil {
			return err
		}
		st.Users = append(st.Users, u)
	case len(k) > len(authRolePrefix) && k[:len(authRolePrefix)] == authRolePrefix:
		r := new(authpb.Role)
		if err := decodeAuthProto(key, payload, r, r.GetName); err != nil {
			return err
		}
		st.Roles = append(st.Roles, r)
	default:
		return fmt.Errorf("%w: unknown auth entry %q", ErrCorrupt, key)
	}
	return nil
}

func decodeAuthProto(key, payload []byte, m proto.Message, name func() []byte) error {
	if err := proto.Unmarshal(payload, m); err != nil {
		return fmt.Errorf("%w: auth entry %q: %v", ErrCorrupt, key, err)
	}
	if n := name(); string(n) != string(key[len(authUserPrefix):]) {
		return fmt.Errorf("%w: auth entry %q holds %q", ErrCorrupt, key, n)
	}
	return nil
}
