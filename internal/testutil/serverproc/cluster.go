package serverproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// ClusterConfig configures StartCluster: Config is what the members have in
// common (their kind, binary, output, flags).
type ClusterConfig struct {
	Config
	// Members is the number of members (3 or 5, say).
	Members int
	// DataDirs are the members' data directories, one each.
	DataDirs []string
	// Outputs, if set, are the members' outputs, one each, in place of
	// Config.Output (which they then all share).
	Outputs []io.Writer
	// Proxy puts a PeerProxy in front of each member's peer URL: the
	// members reach each other through them, so that a test can cut a
	// member off (see Cluster.Isolate).
	Proxy bool
	// NATSCluster makes revd members' embedded NATS servers one NATS
	// cluster (--nats-cluster-listen, --nats-routes).
	NATSCluster bool
	// PeerScheme is the peer URLs' scheme: "http" (the default) or
	// "https" (Config.ExtraArgs then give the --peer-* TLS flags).
	PeerScheme string
	// Prepare, if set, is called once the members' names and peer URLs
	// are chosen, before any starts (their --initial-cluster is each
	// name=URL, their --initial-cluster-token ClusterToken): to fill their
	// data directories for that cluster, say.
	Prepare func(names, peerURLs []string) error
}

// ClusterToken is the --initial-cluster-token of StartCluster's members.
const ClusterToken = "serverproc"

// Cluster is a running cluster: member i is Members[i], named Names[i],
// reached by its peers at PeerURLs[i] (its proxy's, with Proxy).
type Cluster struct {
	Members  []*Server
	Names    []string
	PeerURLs []string
	Proxies  []*PeerProxy // with ClusterConfig.Proxy
}

// StartCluster starts a new cluster of cfg.Members members on free loopback
// ports, all at once (a member answers only once a quorum runs), and waits
// until each answers. On failure what started is killed.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	n := cfg.Members
	if n < 1 || len(cfg.DataDirs) != n {
		return nil, fmt.Errorf("serverproc: a cluster of %d members needs %d data directories, got %d", n, n, len(cfg.DataDirs))
	}
	if cfg.Outputs != nil && len(cfg.Outputs) != n {
		return nil, fmt.Errorf("serverproc: a cluster of %d members needs %d outputs, got %d", n, n, len(cfg.Outputs))
	}
	ports, err := FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Members: make([]*Server, n)}
	listen := make([]string, n)
	for i := range n {
		c.Names = append(c.Names, "m"+strconv.Itoa(i+1))
		scheme := cfg.PeerScheme
		if scheme == "" {
			scheme = "http"
		}
		listen[i] = scheme + "://127.0.0.1:" + strconv.Itoa(ports[i])
		c.PeerURLs = append(c.PeerURLs, listen[i])
		if cfg.Proxy {
			p, err := NewPeerProxy(listen[i])
			if err != nil {
				c.close()
				return nil, err
			}
			c.Proxies = append(c.Proxies, p)
			c.PeerURLs[i] = p.URL()
		}
	}
	var initial []string
	for i := range n {
		initial = append(initial, c.Names[i]+"="+c.PeerURLs[i])
	}
	if cfg.Prepare != nil {
		if err := cfg.Prepare(c.Names, c.PeerURLs); err != nil {
			c.close()
			return nil, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		mc := cfg.Config
		mc.DataDir = cfg.DataDirs[i]
		if cfg.Outputs != nil {
			mc.Output = cfg.Outputs[i]
		}
		mc.ExtraArgs = append([]string{
			"--name=" + c.Names[i],
			"--listen-peer-urls=" + listen[i],
			"--initial-advertise-peer-urls=" + c.PeerURLs[i],
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-token=" + ClusterToken,
		}, cfg.ExtraArgs...)
		if cfg.NATSCluster && cfg.Kind == KindRevd {
			var routes []string
			for j := range n {
				if j != i {
					routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(ports[n+j]))
				}
			}
			mc.ExtraArgs = append(mc.ExtraArgs, "--nats-cluster-listen=127.0.0.1:"+strconv.Itoa(ports[n+i]),
				"--nats-routes="+strings.Join(routes, ","))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Members[i], errs[i] = Start(ctx, mc)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Kill()
		c.close()
		return nil, err
	}
	return c, nil
}

// Kill kills every member still running.
func (c *Cluster) Kill() {
	for _, m := range c.Members {
		if m != nil {
			m.Kill()
		}
	}
}

// Close kills the members and stops the proxies.
func (c *Cluster) Close() {
	c.Kill()
	c.close()
}

func (c *Cluster) close() {
	for _, p := range c.Proxies {
		p.Close()
	}
}

// Isolate cuts member i off from the others (with ClusterConfig.Proxy):
// nothing reaches it through its proxy, and nothing it sends gets through
// theirs. id is its member id, which its requests name. Isolate(i, id,
// false) heals it.
func (c *Cluster) Isolate(i int, id uint64, on bool) {
	for j, p := range c.Proxies {
		if j == i {
			p.CutAll(on)
		} else {
			p.CutFrom(id, on)
		}
	}
}
