package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"revd/tests/testutil"
)

// gatewayIDs are the JSON fields that legitimately differ between two
// servers: ids, term, raft indexes, database sizes.
var gatewayIDs = map[string]bool{"cluster_id": true, "member_id": true, "raft_term": true, "leader": true,
	"raftIndex": true, "raftAppliedIndex": true, "raftTerm": true, "dbSize": true, "dbSizeInUse": true}

// normalizeJSON decodes body and blanks the fields of gatewayIDs and a
// member's ID and client URLs, and drops its peer URLs (revd has no
// peers). protojson spaces its
// output at random per binary, so answers are compared decoded.
func normalizeJSON(t *testing.T, body string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return body // not JSON (a plain-text error): compared as it is
	}
	var walk func(any, bool) any
	walk = func(v any, member bool) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch {
				case member && k == "peerURLs":
					delete(x, k) // etcd's peers; revd has none
				case gatewayIDs[k], member && (k == "ID" || k == "clientURLs"):
					x[k] = "N"
				default:
					x[k] = walk(e, k == "members")
				}
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i], member)
			}
		}
		return v
	}
	return walk(v, false)
}

// gatewayCall POSTs body to path and returns the status and, for a
// stream, its first lines messages.
func gatewayCall(t *testing.T, base, path, body string, lines int) (int, []any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var out []any
	if lines == 0 {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, []any{normalizeJSON(t, string(b))}
	}
	sc := bufio.NewScanner(resp.Body)
	for len(out) < lines && sc.Scan() {
		out = append(out, normalizeJSON(t, sc.Text()))
	}
	return resp.StatusCode, out
}

// TestJSONGateway sends the same JSON gateway requests (curl's view of
// etcd) to a fresh etcd and a fresh target and requires the same statuses
// and answers, ids, terms and sizes aside.
func TestJSONGateway(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	ref := testutil.StartEtcd(t, testutil.Options{})
	tgt := testutil.Start(t, kind, testutil.Options{})
	// Base64: foo Zm9v, bar YmFy, foo0 Zm9vMA==, fop Zm9w, baz YmF6.
	for i, c := range []struct {
		path, body string
		lines      int // a stream: how many messages to compare
	}{
		{"/v3/kv/put", `{"key":"Zm9v","value":"YmFy"}`, 0},
		{"/v3/kv/put", `{"key":"Zm9vMA==","value":"YmF6","prev_kv":true}`, 0},
		{"/v3/kv/put", `{"key":"Zm9vMA==","value":"YmFy","prev_kv":true}`, 0},
		{"/v3/kv/range", `{"key":"Zm9v"}`, 0},
		{"/v3/kv/range", `{"key":"Zm9v","range_end":"Zm9w","sort_order":"DESCEND","limit":"1"}`, 0},
		{"/v3beta/kv/range", `{"key":"Zm9v","range_end":"Zm9w","count_only":true}`, 0},
		{"/v3/kv/range", `{"key":""}`, 0},
		{"/v3/kv/range", `not json`, 0},
		{"/v3/kv/range", `{"key":"Zm9v","unknown_field":1}`, 0},
		{"/v3/kv/txn", `{"compare":[{"key":"Zm9v","target":"VALUE","result":"EQUAL","value":"YmFy"}],"success":[{"request_put":{"key":"Zm9v","value":"YmF6"}}],"failure":[{"request_range":{"key":"Zm9v"}}]}`, 0},
		{"/v3/kv/txn", `{"compare":[{"key":"Zm9v","target":"VALUE","result":"EQUAL","value":"YmFy"}],"success":[{"request_put":{"key":"Zm9v","value":"YmF6"}}],"failure":[{"request_range":{"key":"Zm9v"}}]}`, 0},
		{"/v3/kv/deleterange", `{"key":"Zm9vMA==","prev_kv":true}`, 0},
		{"/v3/kv/compaction", `{"revision":"3","physical":true}`, 0},
		{"/v3/kv/range", `{"key":"Zm9v","revision":"2"}`, 0},
		{"/v3/lease/grant", `{"TTL":"60","ID":"4242"}`, 0},
		{"/v3/lease/grant", `{"TTL":"60","ID":"4242"}`, 0},
		{"/v3/kv/put", `{"key":"YmFy","value":"YmF6","lease":"4242"}`, 0},
		{"/v3/lease/timetolive", `{"ID":"4242","keys":true}`, 0},
		{"/v3/lease/leases", `{}`, 0},
		{"/v3/lease/keepalive", `{"ID":"4242"}`, 1},
		{"/v3/lease/revoke", `{"ID":"4242"}`, 0},
		{"/v3/lease/revoke", `{"ID":"4242"}`, 0},
		{"/v3/watch", `{"create_request":{"key":"Zm9v","range_end":"Zm9w","start_revision":"3"}}`, 2},
		{"/v3/maintenance/status", `{}`, 0},
		{"/v3/maintenance/alarm", `{"action":"GET"}`, 0},
		{"/v3/cluster/member/list", `{}`, 0},
		{"/v3/auth/status", `{}`, 0},
		{"/v3/auth/authenticate", `{"name":"root","password":"secret"}`, 0},
		{"/v3/kv/nope", `{}`, 0},
	} {
		wantStatus, want := gatewayCall(t, ref.ClientURL, c.path, c.body, c.lines)
		gotStatus, got := gatewayCall(t, tgt.ClientURL, c.path, c.body, c.lines)
		if wantStatus != gotStatus || !reflect.DeepEqual(want, got) {
			w, _ := json.Marshal(want)
			g, _ := json.Marshal(got)
			t.Fatalf("#%d POST %s %s:\netcd 3.7.3: %d %s\n%s: %d %s", i, c.path, c.body, wantStatus, w, kind, gotStatus, g)
		}
	}
}

// wsSession opens path of base as a websocket (etcd's gateway streams),
// sends each request as a text message and reads reads[i] messages after
// the i-th, normalized.
func wsSession(t *testing.T, base, path string, requests []string, reads []int) []any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(base, "http")+path, nil)
	if err != nil {
		t.Fatalf("websocket %s: %v", path, err)
	}
	resp.Body.Close()
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out []any
	for i, req := range requests {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(req)); err != nil {
			t.Fatalf("websocket %s: send %s: %v", path, req, err)
		}
		for range reads[i] {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				t.Fatalf("websocket %s: after %s: %v", path, req, err)
			}
			out = append(out, normalizeJSON(t, string(msg)))
		}
	}
	return out
}

// TestJSONGatewayWebsocket: as on etcd, a gateway stream opened as a
// websocket takes one JSON request per message and answers one JSON
// response per message: watches (a creation with the history it asks for,
// a second watch on the same stream, a progress request) and lease
// keep-alives (of a lease, and of one that does not exist).
func TestJSONGatewayWebsocket(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	ref := testutil.StartEtcd(t, testutil.Options{})
	tgt := testutil.Start(t, kind, testutil.Options{})
	run := func(p *testutil.Proc) []any {
		var out []any
		for _, c := range []struct{ path, body string }{
			{"/v3/kv/put", `{"key":"Zm9v","value":"YmFy"}`},
			{"/v3/lease/grant", `{"TTL":"60","ID":"4242"}`},
		} {
			_, resp := gatewayCall(t, p.ClientURL, c.path, c.body, 0)
			out = append(out, resp...)
		}
		out = append(out, wsSession(t, p.ClientURL, "/v3/watch", []string{
			`{"create_request":{"key":"Zm9v","start_revision":"1"}}`,
			`{"create_request":{"key":"YmFy"}}`,
			`{"progress_request":{}}`,
		}, []int{2, 1, 1})...)
		out = append(out, wsSession(t, p.ClientURL, "/v3/lease/keepalive", []string{`{"ID":"4242"}`, `{"ID":"4242"}`, `{"ID":"1"}`}, []int{1, 1, 1})...)
		return out
	}
	want, got := run(ref), run(tgt)
	if !reflect.DeepEqual(want, got) {
		w, _ := json.MarshalIndent(want, "", " ")
		g, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("etcd 3.7.3:\n%s\n%s:\n%s", w, kind, g)
	}
}
