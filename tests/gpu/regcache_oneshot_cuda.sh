#!/bin/sh
# regcache_oneshot_cuda.sh - fastpath/regcache_oneshot.sh (the same with one-shot forced: zero
# copy from the peers' send buffers) with the cuda backend.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/fastpath/regcache_oneshot.sh" "$@"
