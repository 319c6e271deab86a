package cluster

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"revd/tests/testutil"
)

// learnerMetric is etcd_server_is_learner in the /metrics of the member
// at url (-1 if it is missing).
func learnerMetric(t *testing.T, url string) float64 {
	t.Helper()
	m := scrapeServer(t, url)
	if v, ok := m["is_learner"]; ok {
		return v
	}
	return -1
}

// memberMetrics are the figures of member i's /metrics (etcd's names) that
// say who leads and how far the log is: etcd_server_has_leader, _is_leader,
// _is_learner, _leader_changes_seen_total, _proposals_committed_total and
// _proposals_applied_total, by name without the prefix.
func memberMetrics(t *testing.T, c *testutil.Cluster, i int) map[string]float64 {
	t.Helper()
	return scrapeServer(t, c.Members[i].ClientURL)
}

// scrapeServer reads the etcd_server_ figures of the /metrics of the
// member at url, by name without the prefix.
func scrapeServer(t *testing.T, url string) map[string]float64 {
	t.Helper()
	cli := http.Client{Timeout: 10 * time.Second}
	resp, err := cli.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("%s/metrics: %v", url, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "etcd_server_") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[strings.TrimPrefix(name, "etcd_server_")] = v
		}
	}
	return out
}

// checkLeaderMetrics waits until every running member's metrics name lead
// (an index of c.Members) as the only leader, as etcd's do, and returns
// each member's leader changes seen.
func checkLeaderMetrics(t *testing.T, c *testutil.Cluster, lead int) []float64 {
	t.Helper()
	var problem string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		problem = ""
		changes := make([]float64, len(c.Members))
		for i := range c.Members {
			if !c.Members[i].Running() {
				continue
			}
			m := memberMetrics(t, c, i)
			isLeader := 0.0
			if i == lead {
				isLeader = 1
			}
			switch {
			case m["has_leader"] != 1 || m["is_leader"] != isLeader || m["is_learner"] != 0:
				problem = fmt.Sprintf("%s reports has_leader, is_leader, is_learner %v, %v, %v; %s leads",
					c.Names[i], m["has_leader"], m["is_leader"], m["is_learner"], c.Names[lead])
			case m["leader_changes_seen_total"] < 1:
				problem = c.Names[i] + " saw no leader change"
			case m["proposals_applied_total"] < 1 || m["proposals_committed_total"] < m["proposals_applied_total"]:
				problem = fmt.Sprintf("%s reports proposals committed %v, applied %v",
					c.Names[i], m["proposals_committed_total"], m["proposals_applied_total"])
			}
			if problem != "" {
				break
			}
			changes[i] = m["leader_changes_seen_total"]
		}
		if problem == "" {
			return changes
		}
	}
	t.Fatal(problem)
	return nil
}
