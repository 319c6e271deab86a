package authgate

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"

	"revd/actors/sequencer"
	"revd/journal"
)

// backend is the storage under etcd's auth store (go.etcd.io/etcd/
// server/v3/auth, which revd runs as it is, so that users, roles,
// permissions, tokens and their errors are etcd's own): the auth state in
// memory, journaled under "a/" as the store changes it.
//
// The store changes its backend inside BatchTx().Lock() ... Unlock(), and
// reads it either there or inside ReadTx().RLock() ... RUnlock(), or through
// the Get methods. Here the changes of one Lock ... Unlock are handed to
// commit (Options.Commit: the server hands them to the sequencer as one
// sequencer.Change, which joins the next group commit) at Unlock, and
// Unlock waits until they are durable, so every change the store makes is
// durable before the store call that made it returns (etcd's bbolt commits
// later; its raft log made the request durable first). A failed commit
// cannot be returned through the store's interface: it is kept (failed) for
// the gate to refuse the call's answer, and passed to onFail
// (Options.OnCommitFail), which stops the server's writes as a failed
// journal does. A commit lost to a leader change (sequencer.ErrLost,
// ErrNotLeader) left in memory what the log never gets: it is marked
// (takeLost) for the gate to go back to the journal's state (reset). On a
// member that did not decide them, changes come from the log (apply).
//
// Reads return copies: the store edits what it reads before writing it back.
type backend struct {
	commit func([]journal.AuthChange) error
	onFail func(error)

	batchMu sync.Mutex // held from BatchTx().Lock to Unlock
	pending []journal.AuthChange
	err     error // the first failed commit (under batchMu)
	// lost is set when a commit was lost to a leader change (its changes
	// are in memory, not in the log): the gate reloads the backend.
	lost bool
	// dry, while the gate runs a store call for its side effects alone
	// (Gate.Follow), keeps the call's writes from the state and the log.
	dry bool

	mu      sync.RWMutex // guards the state below; batch holders write it
	enabled bool
	rev     uint64
	users   map[string]*authpb.User
	roles   map[string]*authpb.Role
}

func newBackend(st journal.AuthState, commit func([]journal.AuthChange) error, onFail func(error)) *backend {
	b := &backend{commit: commit, onFail: onFail, enabled: st.Enabled, rev: st.Revision,
		users: map[string]*authpb.User{}, roles: map[string]*authpb.Role{}}
	for _, u := range st.Users {
		b.users[string(u.Name)] = u
	}
	for _, r := range st.Roles {
		b.roles[string(r.Name)] = r
	}
	return b
}

// failed returns the first commit that failed, nil if none did.
func (b *backend) failed() error {
	b.batchMu.Lock()
	defer b.batchMu.Unlock()
	return b.err
}

func (b *backend) CreateAuthBuckets() {}
func (b *backend) ForceCommit()       {}

func (b *backend) ReadTx() auth.AuthReadTx   { return readTx{backendState{b}} }
func (b *backend) BatchTx() auth.AuthBatchTx { return batchTx{backendState{b}} }

func (b *backend) GetUser(name string) *authpb.User {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return backendState{b}.UnsafeGetUser(name)
}

func (b *backend) GetAllUsers() []*authpb.User {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return backendState{b}.UnsafeGetAllUsers()
}

func (b *backend) GetRole(name string) *authpb.Role {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return backendState{b}.UnsafeGetRole(name)
}

func (b *backend) GetAllRoles() []*authpb.Role {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return backendState{b}.UnsafeGetAllRoles()
}

// backendState reads the state; its caller holds mu for reading, or batchMu
// (whose holder is the only writer).
type backendState struct{ b *backend }

func (s backendState) UnsafeReadAuthEnabled() bool    { return s.b.enabled }
func (s backendState) UnsafeReadAuthRevision() uint64 { return s.b.rev }

func (s backendState) UnsafeGetUser(name string) *authpb.User {
	if u, ok := s.b.users[name]; ok {
		return proto.Clone(u).(*authpb.User)
	}
	return nil
}

func (s backendState) UnsafeGetRole(name string) *authpb.Role {
	if r, ok := s.b.roles[name]; ok {
		return proto.Clone(r).(*authpb.Role)
	}
	return nil
}

// UnsafeGetAllUsers lists every user in name order, as etcd's bucket scan.
func (s backendState) UnsafeGetAllUsers() []*authpb.User {
	return sortedClones(s.b.users, func(*authpb.User) bool { return true })
}

// UnsafeGetAllRoles lists the roles in name order, as etcd's scan of the
// bucket from "\x00" to "\xff" does: a name starting with byte 0xff is left
// out.
func (s backendState) UnsafeGetAllRoles() []*authpb.Role {
	return sortedClones(s.b.roles, func(r *authpb.Role) bool { return len(r.Name) == 0 || r.Name[0] != 0xff })
}

func sortedClones[T proto.Message](m map[string]T, keep func(T) bool) []T {
	names := make([]string, 0, len(m))
	for n, v := range m {
		if keep(v) {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, strings.Compare)
	if len(names) == 0 {
		return nil
	}
	out := make([]T, len(names))
	for i, n := range names {
		out[i] = proto.Clone(m[n]).(T)
	}
	return out
}

type readTx struct{ backendState }

func (t readTx) RLock()   { t.b.mu.RLock() }
func (t readTx) RUnlock() { t.b.mu.RUnlock() }

type batchTx struct{ backendState }

func (t batchTx) Lock() { t.b.batchMu.Lock() }

// Unlock journals the changes made since Lock, synced.
func (t batchTx) Unlock() {
	b := t.b
	if len(b.pending) > 0 {
		if err := b.commit(b.pending); errors.Is(err, sequencer.ErrLost) || errors.Is(err, sequencer.ErrNotLeader) {
			b.lost = true
		} else if err != nil {
			if b.err == nil {
				b.err = err
			}
			b.onFail(err)
		}
		b.pending = nil
	}
	b.batchMu.Unlock()
}

// takeLost reports, once, that a commit was lost to a leader change.
func (b *backend) takeLost() bool {
	b.batchMu.Lock()
	defer b.batchMu.Unlock()
	lost := b.lost
	b.lost = false
	return lost
}

// reset replaces the state with st (the journal's), dropping changes a
// lost commit left in memory.
func (b *backend) reset(st journal.AuthState) {
	fresh := newBackend(st, nil, nil)
	b.mu.Lock()
	b.enabled, b.rev, b.users, b.roles = fresh.enabled, fresh.rev, fresh.users, fresh.roles
	b.mu.Unlock()
}

// apply makes changes another member's leader decided, as journaled.
func (b *backend) apply(changes []journal.AuthChange) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range changes {
		switch {
		case c.Enabled != nil:
			b.enabled = *c.Enabled
		case c.Revision != nil:
			b.rev = *c.Revision
		case c.PutUser != nil:
			b.users[string(c.PutUser.Name)] = proto.Clone(c.PutUser).(*authpb.User)
		case c.DeleteUser != "":
			delete(b.users, c.DeleteUser)
		case c.PutRole != nil:
			b.roles[string(c.PutRole.Name)] = proto.Clone(c.PutRole).(*authpb.Role)
		case c.DeleteRole != "":
			delete(b.roles, c.DeleteRole)
		}
	}
}

// dryRun runs fn, store calls whose writes go nowhere (dry is read by
// change, under batchMu, which every store call that writes holds).
func (b *backend) dryRun(fn func()) {
	b.setDry(true)
	defer b.setDry(false)
	fn()
}

func (b *backend) setDry(on bool) {
	b.batchMu.Lock()
	b.dry = on
	b.batchMu.Unlock()
}

func (t batchTx) change(c journal.AuthChange, apply func()) {
	if t.b.dry {
		return
	}
	t.b.mu.Lock()
	apply()
	t.b.mu.Unlock()
	t.b.pending = append(t.b.pending, c)
}

func (t batchTx) UnsafeSaveAuthEnabled(on bool) {
	t.change(journal.AuthChange{Enabled: &on}, func() { t.b.enabled = on })
}

func (t batchTx) UnsafeSaveAuthRevision(rev uint64) {
	t.change(journal.AuthChange{Revision: &rev}, func() { t.b.rev = rev })
}

func (t batchTx) UnsafePutUser(u *authpb.User) {
	u = proto.Clone(u).(*authpb.User)
	t.change(journal.AuthChange{PutUser: u}, func() { t.b.users[string(u.Name)] = u })
}

func (t batchTx) UnsafeDeleteUser(name string) {
	t.change(journal.AuthChange{DeleteUser: name}, func() { delete(t.b.users, name) })
}

func (t batchTx) UnsafePutRole(r *authpb.Role) {
	r = proto.Clone(r).(*authpb.Role)
	t.change(journal.AuthChange{PutRole: r}, func() { t.b.roles[string(r.Name)] = r })
}

func (t batchTx) UnsafeDeleteRole(name string) {
	t.change(journal.AuthChange{DeleteRole: name}, func() { delete(t.b.roles, name) })
}
