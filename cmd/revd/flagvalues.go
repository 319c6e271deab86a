package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/types"
)

// The flag.Value types of revd's flags that take etcd's forms.

// uint32Flag is a flag holding a uint32, parsed as etcd parses its
// --max-concurrent-streams.
type uint32Flag struct{ p *uint32 }

func (f uint32Flag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatUint(uint64(*f.p), 10)
}

func (f uint32Flag) Set(s string) error {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return err
	}
	*f.p = uint32(v)
	return nil
}

// byteSizeFlag is a size in bytes: a plain number, or one with a unit
// (KiB, MiB, GiB, TiB: powers of 1024; KB, MB, GB, TB: powers of 1000).
type byteSizeFlag struct{ p *int64 }

func (f byteSizeFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatInt(*f.p, 10)
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func (f byteSizeFlag) Set(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || (mult > 1 && v > (1<<62)/mult) {
		return fmt.Errorf("%q is not a size in bytes (such as 268435456, 256MiB or 1GiB)", s)
	}
	*f.p = v * mult
	return nil
}

// originsFlag is etcd's --cors: "*", or comma-separated URLs
// (scheme://host:port, checked as etcd checks them) kept as a set. As in
// etcd, a value replaces the set, except "*", which is added to it.
type originsFlag struct{ values map[string]struct{} }

func (f *originsFlag) String() string { return strings.Join(slices.Sorted(maps.Keys(f.values)), ",") }

func (f *originsFlag) Set(s string) error {
	if s == "*" {
		f.values["*"] = struct{}{}
		return nil
	}
	us, err := types.NewURLs(strings.Split(s, ","))
	if err != nil {
		return err
	}
	f.values = map[string]struct{}{}
	for _, u := range us {
		f.values[u.String()] = struct{}{}
	}
	return nil
}

// stringSetFlag is etcd's --host-whitelist: comma-separated strings kept as
// a set, each value replacing the last.
type stringSetFlag struct{ values map[string]struct{} }

func (f *stringSetFlag) String() string { return strings.Join(slices.Sorted(maps.Keys(f.values)), ",") }

func (f *stringSetFlag) Set(s string) error {
	f.values = map[string]struct{}{}
	for _, v := range strings.Split(s, ",") {
		f.values[v] = struct{}{}
	}
	return nil
}
