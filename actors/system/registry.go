package system

import cmap "github.com/orcaman/concurrent-map"

// protoactor's process registry (actor.NewProcessRegistry) keys every
// spawned actor by its id in 1,024 concurrent maps, each of which
// github.com/orcaman/concurrent-map splits into SHARD_COUNT shards (32 by
// default): 32,768 empty maps and locks, some 3.5 MiB of heap, held for
// the process's life and marked by every garbage collection, and doubled
// by the heap's growth before each collection (the idle server's peak
// memory). revd registers a few hundred actors, each looked up once per
// reference (a PID caches its process), so one shard per map, 1,024 locks
// in all, is plenty.
//
// The package variable is read by every map operation, not only when a
// map is made, so it is set here, before any actor system exists (package
// initialization runs before main and before any test), and never again.
// Nothing else in revd uses concurrent-map.
func init() { cmap.SHARD_COUNT = registryShards }

// registryShards is the shards of each of the registry's maps.
const registryShards = 1
