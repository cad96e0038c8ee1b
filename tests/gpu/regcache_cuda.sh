#!/bin/sh
# regcache_cuda.sh - fastpath/regcache.sh (no stale IPC mapping after free and re-allocation at
# the same address; LRU eviction; two-shot forced) with the cuda backend: the real IPC handles
# and the real allocator, whose address reuse the test provokes.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/fastpath/regcache.sh" "$@"
