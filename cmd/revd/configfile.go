package main

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// etcd's configuration file (--config-file), read as etcd 3.7.3 reads it
// (embed.ConfigFromFile): YAML, turned into JSON and decoded into Go
// values of etcd's types, so that a file etcd takes revd takes, and a value
// of the wrong type (a duration written "5s": etcd's durations are whole
// nanoseconds in the file) is refused as etcd refuses it. Each key revd
// knows becomes the flag of the same name (client-transport-security's
// become the TLS flags), and the flags are then checked as on a command
// line. As in etcd, a file replaces the command line and the environment:
// only its settings and the defaults count.
//
// Keys etcd has and revd ignores (discovery, some of raft's, logging, bbolt's tuning)
// are named in a warning, as their flags are; so is any other key, which
// etcd ignores without a word. revd's own flags are keys of the same name
// (nats-url: ...), which etcd, in turn, ignores. client-transport-security's
// allowed-cn, a restriction revd cannot apply, is refused.

// fileConfig is the part of etcd's file revd reads. The json names are
// etcd's; flag, when given, is the flag a key sets (default: its name).
type fileConfig struct {
	Name                        string             `json:"name" empty:"keep"`
	DataDir                     string             `json:"data-dir"`
	ListenClientURLs            string             `json:"listen-client-urls"`
	ListenClientHTTPURLs        string             `json:"listen-client-http-urls"`
	AdvertiseClientURLs         string             `json:"advertise-client-urls"`
	ListenMetricsURLs           string             `json:"listen-metrics-urls"`
	InitialCluster              string             `json:"initial-cluster"`
	QuotaBackendBytes           int64              `json:"quota-backend-bytes"`
	MaxTxnOps                   uint               `json:"max-txn-ops"`
	MaxRequestBytes             uint               `json:"max-request-bytes"`
	MaxConcurrentStreams        uint32             `json:"max-concurrent-streams"`
	GRPCKeepAliveMinTime        time.Duration      `json:"grpc-keepalive-min-time"`
	GRPCKeepAliveInterval       time.Duration      `json:"grpc-keepalive-interval"`
	GRPCKeepAliveTimeout        time.Duration      `json:"grpc-keepalive-timeout"`
	WatchProgressNotifyInterval time.Duration      `json:"watch-progress-notify-interval"`
	AutoCompactionMode          string             `json:"auto-compaction-mode" empty:"keep"`
	AutoCompactionRetention     string             `json:"auto-compaction-retention" empty:"keep"`
	AuthToken                   string             `json:"auth-token"`
	AuthTokenTTL                uint               `json:"auth-token-ttl"`
	BcryptCost                  uint               `json:"bcrypt-cost"`
	LogLevel                    string             `json:"log-level"`
	LogFormat                   string             `json:"log-format"`
	LogOutputs                  []string           `json:"log-outputs"`
	Logger                      string             `json:"logger"`
	EnableLogRotation           bool               `json:"enable-log-rotation"`
	LogRotationConfigJSON       string             `json:"log-rotation-config-json" empty:"keep"`
	EnablePprof                 bool               `json:"enable-pprof"`
	CORS                        string             `json:"cors"`
	HostWhitelist               string             `json:"host-whitelist"`
	CipherSuites                []string           `json:"cipher-suites"`
	TLSMinVersion               string             `json:"tls-min-version"`
	TLSMaxVersion               string             `json:"tls-max-version"`
	SelfSignedCertValidity      uint               `json:"self-signed-cert-validity"`
	SocketOptions               socketOptions      `json:"socket-options"`
	ClientSecurity              securityConfig     `json:"client-transport-security"`
	ListenPeerURLs              string             `json:"listen-peer-urls"`
	AdvertisePeerURLs           string             `json:"initial-advertise-peer-urls"`
	InitialClusterState         string             `json:"initial-cluster-state"`
	InitialClusterToken         string             `json:"initial-cluster-token"`
	HeartbeatInterval           uint               `json:"heartbeat-interval"`
	ElectionTimeout             uint               `json:"election-timeout"`
	PreVote                     bool               `json:"pre-vote"`
	InitialElectionTickAdvance  bool               `json:"initial-election-tick-advance"`
	SnapshotCount               uint64             `json:"snapshot-count"`
	SnapshotCatchUpEntries      uint64             `json:"snapshot-catchup-entries"`
	StrictReconfigCheck         bool               `json:"strict-reconfig-check"`
	ForceNewCluster             bool               `json:"force-new-cluster"`
	MaxLearners                 int                `json:"max-learners"`
	MaxSnapshots                uint               `json:"max-snapshots"`
	MaxWALs                     uint               `json:"max-wals"`
	PeerSecurity                peerSecurityConfig `json:"peer-transport-security"`
	CorruptCheckTime            time.Duration      `json:"corrupt-check-time"`
	CompactHashCheckTime        time.Duration      `json:"compact-hash-check-time"`
	FeatureGates                string             `json:"feature-gates"`

	// revd's own.
	NATSListen        string `json:"nats-listen"`
	NATSURL           string `json:"nats-url"`
	NATSUser          string `json:"nats-user"`
	NATSPassword      string `json:"nats-password"`
	NATSAuth          string `json:"nats-auth"`
	NATSCreds         string `json:"nats-creds"`
	NATSNkey          string `json:"nats-nkey"`
	NATSTLSCA         string `json:"nats-tls-ca"`
	NATSTLSCert       string `json:"nats-tls-cert"`
	NATSTLSKey        string `json:"nats-tls-key"`
	NATSSubjectPrefix string `json:"nats-subject-prefix"`
	NATSCluster       string `json:"nats-cluster-listen"`
	NATSRoutes        string `json:"nats-routes"`
	Pprof             string `json:"pprof"`
	MaxWatchQueue     int64  `json:"max-watch-queue-bytes"`
}

// socketOptions is etcd's socket-options.
type socketOptions struct {
	ReusePort    bool `json:"reuse-port" flag:"socket-reuse-port"`
	ReuseAddress bool `json:"reuse-address" flag:"socket-reuse-address"`
}

// securityConfig is etcd's client-transport-security.
type securityConfig struct {
	CertFile         string   `json:"cert-file"`
	KeyFile          string   `json:"key-file"`
	ClientCertAuth   bool     `json:"client-cert-auth"`
	TrustedCAFile    string   `json:"trusted-ca-file"`
	AutoTLS          bool     `json:"auto-tls"`
	AllowedHostnames []string `json:"allowed-hostname" flag:"client-cert-allowed-hostname"`
	AllowedCNs       []string `json:"allowed-cn" flag:"-"`
	ClientCertFile   string   `json:"client-cert-file"`
	ClientKeyFile    string   `json:"client-key-file"`
	SkipSANVerify    bool     `json:"skip-client-san-verification" flag:"-"`
}

// peerSecurityConfig is etcd's peer-transport-security: the peer TLS flags.
type peerSecurityConfig struct {
	CertFile         string   `json:"cert-file" flag:"peer-cert-file"`
	KeyFile          string   `json:"key-file" flag:"peer-key-file"`
	ClientCertAuth   bool     `json:"client-cert-auth" flag:"peer-client-cert-auth"`
	TrustedCAFile    string   `json:"trusted-ca-file" flag:"peer-trusted-ca-file"`
	AutoTLS          bool     `json:"auto-tls" flag:"peer-auto-tls"`
	AllowedHostnames []string `json:"allowed-hostname" flag:"peer-cert-allowed-hostname"`
	AllowedCNs       []string `json:"allowed-cn" flag:"peer-cert-allowed-cn"`
	ClientCertFile   string   `json:"client-cert-file" flag:"peer-client-cert-file"`
	ClientKeyFile    string   `json:"client-key-file" flag:"peer-client-key-file"`
	SkipSANVerify    bool     `json:"skip-client-san-verification" flag:"peer-skip-client-san-verification"`
}

// fileOnlyIgnored are etcd's file keys with no flag of the same name that
// revd ignores, with why and the type of value etcd takes.
var fileOnlyIgnored = []ignoredFlag{
	{"discovery-config", kindMap, whyDiscovery, nil},
	{"client-transport-security.skip-client-san-verification", kindBool,
		"revd never checks a client certificate's SANs against the caller's address (etcd does, on https metrics URLs, unless this is set)", nil},
}

// readConfigFile reads path and returns the command line it stands for,
// and a warning for each key ignored.
func readConfigFile(path string) (args, warnings []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--config-file: %w", err)
	}
	var fc fileConfig
	if err := yaml.Unmarshal(b, &fc); err != nil {
		return nil, nil, fmt.Errorf("--config-file %s: %w", path, err)
	}
	var present map[string]any
	if err := yaml.Unmarshal(b, &present); err != nil {
		return nil, nil, fmt.Errorf("--config-file %s: %w", path, err)
	}
	// Keys match whatever their case, as Go's JSON decoding (etcd's)
	// matches them.
	present = lowerKeys(present)
	ignored := map[string]ignoredFlag{}
	for _, f := range slices.Concat(ignoredEtcdFlags, fileOnlyIgnored) {
		ignored[f.name] = f
	}
	var walk func(v reflect.Value, present map[string]any, prefix string) error
	walk = func(v reflect.Value, present map[string]any, prefix string) error {
		known := map[string]bool{}
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			key := strings.Split(sf.Tag.Get("json"), ",")[0]
			known[key] = true
			raw, ok := present[key]
			if !ok || raw == nil {
				continue
			}
			fv := v.Field(i)
			if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeOf(time.Duration(0)) {
				// Decoded into a struct above, so present as a map.
				if err := walk(fv, raw.(map[string]any), key+"."); err != nil {
					return err
				}
				continue
			}
			name := sf.Tag.Get("flag")
			switch {
			case prefix+key == "client-transport-security.allowed-cn":
				if fv.Len() > 0 {
					return fmt.Errorf("--config-file %s: client-transport-security.allowed-cn is not supported: revd cannot restrict client certificates by common name (allowed-hostname restricts them by host name)", path)
				}
				continue
			case ignored[prefix+key].why != "":
				warnings = append(warnings, fmt.Sprintf("config file: %s%s is ignored: %s", prefix, key, ignored[prefix+key].why))
				continue
			case name == "":
				name = key
			}
			value, set := flagValue(fv, sf.Tag.Get("empty") == "keep")
			if name == "self-signed-cert-validity" && value == "0" {
				set = false // etcd's file reading makes 0 its default, 1
			}
			if set {
				args = append(args, "--"+name+"="+value)
			}
		}
		for key, raw := range present {
			switch {
			case known[key]:
			case ignored[prefix+key].why != "":
				f := ignored[prefix+key]
				if err := checkIgnoredType(f, raw); err != nil {
					return fmt.Errorf("--config-file %s: %w", path, err)
				}
				warnings = append(warnings, fmt.Sprintf("config file: %s%s is ignored: %s", prefix, key, f.why))
			default:
				warnings = append(warnings, fmt.Sprintf("config file: unknown key %s%s is ignored", prefix, key))
			}
		}
		return nil
	}
	if err := walk(reflect.ValueOf(&fc).Elem(), present, ""); err != nil {
		return nil, nil, err
	}
	// etcd reads a file from its defaults, whose advertised client URL is
	// http://localhost:2379 whatever the file listens on.
	if fc.ListenClientURLs != "" && fc.AdvertiseClientURLs == "" {
		args = append(args, "--advertise-client-urls="+defaultAdvertiseClientURL)
		warnings = append(warnings, "config file: listen-client-urls without advertise-client-urls: revd advertises etcd's default, "+defaultAdvertiseClientURL+", as etcd does")
	}
	slices.Sort(warnings)
	return args, warnings, nil
}

// defaultAdvertiseClientURL is etcd's DefaultAdvertiseClientURLs.
const defaultAdvertiseClientURL = "http://localhost:2379"

// flagValue writes a decoded value as its flag takes it. Empty lists set
// nothing, and so do empty strings unless keepEmpty: etcd reads "" as
// "unset" for its URL lists, cors and host-whitelist (and revd for its
// own keys, the files' paths, the TLS versions, log-level, data-dir,
// auth-token), but takes it as it is for name, the auto-compaction
// settings and log-rotation-config-json (where it is refused).
func flagValue(v reflect.Value, keepEmpty bool) (string, bool) {
	switch x := v.Interface().(type) {
	case time.Duration:
		return x.String(), true
	case string:
		return x, x != "" || keepEmpty
	case []string:
		return strings.Join(x, ","), len(x) > 0
	case bool:
		return strconv.FormatBool(x), true
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), true
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10), true
	}
	panic(fmt.Sprintf("config file: no flag form for %s", v.Type()))
}

// lowerKeys returns m with its keys, and its maps' keys, in lower case.
func lowerKeys(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = lowerKeys(sub)
		}
		out[strings.ToLower(k)] = v
	}
	return out
}

// checkIgnoredType refuses a value of a type etcd's field for f would not
// take (snapshot-count: many); the value itself is not looked at further.
func checkIgnoredType(f ignoredFlag, raw any) error {
	ok := true
	switch kind := f.kind; kind {
	case kindBool:
		_, ok = raw.(bool)
	case kindUint, kindInt, kindDuration:
		n, isNum := raw.(float64)
		ok = isNum && n == float64(int64(n)) && (kind != kindUint || n >= 0)
	case kindString, kindOneOf, kindSomeOf:
		switch raw.(type) {
		case string, float64, bool:
		case []any: // etcd's lists
		default:
			ok = false
		}
	case kindMap:
		_, ok = raw.(map[string]any)
	}
	if !ok {
		return fmt.Errorf("%s: %v is not a value etcd takes for it", f.name, raw)
	}
	return nil
}
