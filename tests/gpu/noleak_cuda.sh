#!/bin/sh
# noleak_cuda.sh - fastpath/noleak.sh with the cuda backend: the GPU's free memory does not
# shrink over rounds of communicators with teams created, used and freed (test_noleak.c).
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/fastpath/noleak.sh" "$@"
