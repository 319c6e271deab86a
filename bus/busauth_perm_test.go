package bus

import (
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// allowed reports whether perm lets subject through, as nats-server
// matches them: allowed by a filter, and denied by none.
func allowed(perm *server.SubjectPermission, subject string) bool {
	match := func(filter string) bool { return server.SubjectMatchesFilter(subject, filter) }
	return slices.ContainsFunc(perm.Allow, match) && !slices.ContainsFunc(perm.Deny, match)
}

// TestUserPermissions: an etcd user on the bus may send revd's requests,
// a cluster member's own maintenance calls among them, but not publish on
// the commit feed or on a member's watch hand-off subjects; it may read its
// own inboxes only (and root the feed).
func TestUserPermissions(t *testing.T) {
	alice := userPermissions("revd", "alice", false)
	for subject, want := range map[string]bool{
		"revd.kv.put":                    true,
		"revd.maintenance.status":        true,
		"revd.maintenance.status.m1":     true,
		"revd.maintenance.defragment.m2": true,
		"$SRV.PING":                      true,
		"revd.feed":                      false,
		"revd.feed.m1":                   false,
		"revd.watch.cancel.m1":           false,
		"_INBOX_bob.x":                   false,
	} {
		if got := allowed(alice.Publish, subject); got != want {
			t.Errorf("alice publishing on %s: %v, want %v", subject, got, want)
		}
	}
	for subject, want := range map[string]bool{"_INBOX_alice.x.y": true, "_INBOX_bob.x": false, "revd.feed": false} {
		if got := allowed(alice.Subscribe, subject); got != want {
			t.Errorf("alice subscribing to %s: %v, want %v", subject, got, want)
		}
	}
	if root := userPermissions("revd", "root", true); !allowed(root.Subscribe, "revd.feed.m1") {
		t.Error("root may not read the feed")
	}
}
