//go:build linux && cgo

package storage

// The validator caps glibc's malloc arenas at two, unless the operator set
// MALLOC_ARENA_MAX (which glibc reads itself).
//
// Why: built with cgo, Pebble allocates its block cache and memtables with
// C calloc, in pieces of a block or so, from whichever OS thread a
// goroutine runs on. glibc gives threads arenas of their own, up to eight
// per core, and a block freed into one arena is reused from that arena
// only: the 1,000,000-proposal soak (issue 19) found nine 64 MiB arenas
// fully resident, about 600 MiB of RSS beyond a 256 MiB cache, growing with
// the run. With two, what the cache frees is reused by the next block.
//
// The limit must be set before any thread has made an arena of its own:
// glibc fixes its arena count at the first arena it has to add. So it is a
// C constructor, which runs when the program is loaded, before the Go
// runtime starts its threads.

/*
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#define CONTENTLEDGER_MALLOC_ARENAS 2
__attribute__((constructor)) static void contentledger_limit_malloc_arenas(void) {
	if (getenv("MALLOC_ARENA_MAX") == NULL) {
		mallopt(M_ARENA_MAX, CONTENTLEDGER_MALLOC_ARENAS);
	}
}
static int contentledger_malloc_trim(void) { return malloc_trim(0); }
#else
#define CONTENTLEDGER_MALLOC_ARENAS 0
static int contentledger_malloc_trim(void) { return 0; }
#endif
*/
import "C"

// trimMalloc hands the free pages inside glibc's arenas back to the
// system (malloc_trim), reporting whether any were. Not glibc: nothing.
func trimMalloc() bool { return C.contentledger_malloc_trim() == 1 }

// MallocArenas is the glibc malloc arenas the validator allows itself when
// MALLOC_ARENA_MAX is not set (0: not glibc, nothing limited).
const MallocArenas = C.CONTENTLEDGER_MALLOC_ARENAS
