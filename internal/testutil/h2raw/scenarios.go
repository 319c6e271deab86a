package h2raw

import "time"

// Scenarios shared by the tests that compare servers' connection handling.
// Each returns the transcript to compare; ka is the keepalive interval the
// servers were given (for the checks of when things happen).

// SilentClient answers nothing: the server's PING comes after ka, and the
// connection ends at least a timeout (here taken to be ka) later.
func SilentClient(c *Client, ka time.Duration) []string {
	c.ShowPings = true
	tr := c.untilPing(3 * ka)
	pinged := time.Since(c.Start)
	if pinged < ka*9/10 {
		c.t.Errorf("pinged %v after the connection opened, before the keepalive interval %v", pinged, ka)
	}
	tr = append(tr, c.Next(5*ka))
	if closed := time.Since(c.Start); closed-pinged < ka*9/10 {
		c.t.Errorf("closed %v after the ping, before the keepalive timeout", closed-pinged)
	}
	return tr
}

// AnsweringClient answers the server's PINGs for 3.5 keepalive intervals
// (past interval and timeout): it gets one about every interval and stays
// connected; then a Watch call on the connection is answered.
func AnsweringClient(c *Client, ka time.Duration) []string {
	c.ShowPings, c.AckPings = true, true
	tr := c.untilPing(3 * ka)
	if first := time.Since(c.Start); first < ka*9/10 {
		c.t.Errorf("pinged %v after the connection opened, before the keepalive interval %v", first, ka)
	}
	pings := 0
	for end := time.Now().Add(ka * 7 / 2); time.Now().Before(end); {
		switch f := c.Next(time.Until(end)); f {
		case "PING":
			pings++
		case "quiet":
		default:
			tr = append(tr, f)
		}
	}
	if pings < 2 || pings > 5 {
		c.t.Errorf("%d pings in 3.5 keepalive intervals", pings)
	}
	c.ShowPings = false
	c.OpenWatch(1)
	c.WatchRequest(1, 0)
	return append(tr, c.Next(2*time.Second))
}

// EarlyPings sends five PINGs, each once the previous one is answered,
// with no stream open: as grpc-go's server counts, the fourth is the third
// strike.
func EarlyPings(c *Client) []string {
	var tr []string
	for i := range 5 {
		c.Ping(false, byte(i))
		tr = append(tr, c.Next(2*time.Second))
	}
	return append(tr, c.Next(2*time.Second))
}

// BeyondStreamLimit reads the server's SETTINGS, opens three Watch calls
// (streams 1, 3 and 5) and then sends a request on stream 3.
func BeyondStreamLimit(c *Client) []string {
	tr := []string{c.Next(2 * time.Second)}
	c.OpenWatch(1)
	c.OpenWatch(3)
	c.OpenWatch(5)
	tr = append(tr, c.Next(2*time.Second))
	c.WatchRequest(3, 1)
	return append(tr, c.Next(2*time.Second))
}

// untilPing reads until the server's PING (or the end, or nothing for
// wait) and returns what it read.
func (c *Client) untilPing(wait time.Duration) []string {
	var tr []string
	for {
		f := c.Next(wait)
		tr = append(tr, f)
		if f == "PING" || f == "EOF" || f == "quiet" {
			return tr
		}
	}
}
