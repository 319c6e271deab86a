package server

import "testing"

// TestExceedsRequestLimit: etcd's bounds, 5,000 entries committed and not
// applied (10,000 for a lease revoke with the PriorityRequest gate), the
// bound itself still taken.
func TestExceedsRequestLimit(t *testing.T) {
	for _, tc := range []struct {
		applied, committed uint64
		priority, want     bool
	}{
		{100, 100, false, false},
		{100, 5100, false, false},
		{100, 5101, false, true},
		{100, 5101, true, false},
		{100, 10100, true, false},
		{100, 10101, true, true},
		{0, 5001, false, true},
	} {
		if got := exceedsRequestLimit(tc.applied, tc.committed, tc.priority); got != tc.want {
			t.Errorf("applied %d, committed %d, priority %v: %v, want %v", tc.applied, tc.committed, tc.priority, got, tc.want)
		}
	}
}
