//go:build linux && cgo

package main

// Pebble allocates its block cache with C's malloc (internal/manual), one
// block at a time, from whichever thread the reading goroutine runs on.
// glibc's malloc gives threads arenas of their own, up to eight a core, and
// a block freed into one arena is reused only by the threads of that
// arena: under random reads of a data set larger than the cache (blocks
// read and evicted all the time), each arena came to hold its own share of
// the cache plus free space the others could not use. With 1,000,000 keys
// of 1 KiB and the default 128 MiB cache, 300,000 random reads left revd
// with 627 MiB of anonymous memory, of which some 300 MiB was outside Go's
// heap; with a single arena, 486 MiB, at the same read rate (etcd 3.7.3,
// on the same data: 509 MiB).
//
// So revd limits malloc to one arena, as MALLOC_ARENA_MAX=1 would, unless
// the environment sets MALLOC_ARENA_MAX itself. It must happen before the
// Go runtime's threads first call malloc (each would get an arena of its
// own, kept for its life), which is earlier than any Go code runs: a C
// constructor, run when the program is loaded.

/*
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#endif

__attribute__((constructor)) static void revd_malloc_arenas(void) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
	if (getenv("MALLOC_ARENA_MAX") == NULL) {
		mallopt(M_ARENA_MAX, 1);
	}
#endif
}

// revd_malloc_heaps counts malloc's arenas, as malloc_info reports them;
// -1 where it cannot.
static int revd_malloc_heaps(void) {
#ifdef __GLIBC__
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (f == NULL) {
		return -1;
	}
	malloc_info(0, f);
	fclose(f);
	int heaps = 0;
	for (char *p = buf; (p = strstr(p, "<heap nr=")) != NULL; p++) {
		heaps++;
	}
	free(buf);
	return heaps;
#else
	return -1;
#endif
}

// revd_malloc_touch allocates and frees a block, as a cache miss does.
static void revd_malloc_touch(void) {
	free(malloc(4096));
}
*/
import "C"

// mallocArenas is how many arenas C's malloc has, or -1 where the C library
// does not say (it is not glibc).
func mallocArenas() int { return int(C.revd_malloc_heaps()) }

// mallocTouch allocates and frees a block with C's malloc on the calling
// thread.
func mallocTouch() { C.revd_malloc_touch() }
