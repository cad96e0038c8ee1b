#!/bin/sh
# ring_cuda.sh - fastpath/ring.sh with the cuda backend: ring allreduce and chain bcast on 4
# ranks over the machine's GPUs and probed topology; every rank agrees on the ring, every call
# takes the forced algorithm, the results are right.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/fastpath/ring.sh" "$@"
