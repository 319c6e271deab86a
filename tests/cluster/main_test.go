// Package cluster tests revd as a cluster of real processes: members
// killed, paused and cut off (a peer proxy drops their traffic) while
// clients write, membership changed, and the history checked for
// linearizability; where etcd answers something a client sees, a 3-member
// etcd 3.7.3 runs the same and the answers are compared.
//
// The long fault run is behind REVD_CLUSTER_LONG=1 (see README.md).
package cluster

import (
	"testing"

	"revd/tests/testutil"
)

func TestMain(m *testing.M) { testutil.RunMain(m) }
