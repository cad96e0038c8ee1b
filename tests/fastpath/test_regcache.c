/*
 * test_regcache.c - the zero-copy allreduces' registration cache must never serve a stale
 * mapping: a buffer freed and allocated again (often at the same address) carries a new buffer
 * id, so peers map the new allocation.  Also runs more distinct buffers than the cache holds,
 * so that least-recently-used mappings are evicted and mapped again.
 *
 * Run with coll_gpu_allreduce_algorithm=twoshot or oneshot (zero-copy: peers read this rank's
 * own buffers through IPC).  Every round uses fresh data, so a stale mapping shows as a wrong
 * sum.  Exit: TAP.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "tap.h"

#define COUNT 4099 /* odd: uneven two-shot chunks */
#define MANY 80    /* more than the cache's 64 entries */

static int rank, size;

/* Fill a device buffer with round-dependent data; return nothing (checked by the sum). */
static int fill(void *dev, int round)
{
    int32_t host[COUNT];
    for (int i = 0; i < COUNT; ++i) {
        host[i] = (int32_t) ((rank + 1) * 1000 + round * 7 + i % 97);
    }
    return dev_memcpy(dev, host, sizeof(host));
}

/* Allreduce sbuf into a fresh result and compare with the sum computed here. */
static int check_round(void *sbuf, void *rbuf, int round)
{
    int32_t got[COUNT];
    int bad = 0, any_bad = 0;

    memset(got, 0xA5, sizeof(got));
    if (DEV_OK != dev_memcpy(rbuf, got, sizeof(got))) {
        return 0;
    }
    if (MPI_SUCCESS != MPI_Allreduce(sbuf, rbuf, COUNT, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD)
        || DEV_OK != dev_memcpy(got, rbuf, sizeof(got))) {
        bad = 1;
    }
    for (int i = 0; !bad && i < COUNT; ++i) {
        int32_t want = 0;
        for (int r = 0; r < size; ++r) {
            want += (int32_t) ((r + 1) * 1000 + round * 7 + i % 97);
        }
        if (got[i] != want) {
            tap_diag("rank %d round %d: element %d is %d, want %d", rank, round, i, got[i], want);
            bad = 1;
        }
    }
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return !any_bad;
}

int main(int argc, char **argv)
{
    void *s = NULL, *r = NULL, *old_s;
    void *many[MANY];
    int ok, reused = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_set_quiet(0 != rank);
    if (DEV_OK != dev_open(dev_backend_from_name(getenv("OMPI_MCA_coll_gpu_device")))) {
        tap_skip_all("no device backend");
    }
    tap_plan(4);

    dev_mem_alloc(&s, COUNT * sizeof(int32_t));
    dev_mem_alloc(&r, COUNT * sizeof(int32_t));
    fill(s, 1);
    tap_ok(check_round(s, r, 1), "zero-copy allreduce on fresh buffers");

    /* free and allocate again: same size, so the allocator tends to hand back the address */
    old_s = s;
    dev_mem_free(s);
    dev_mem_alloc(&s, COUNT * sizeof(int32_t));
    reused = (s == old_s);
    fill(s, 2);
    ok = check_round(s, r, 2);
    MPI_Allreduce(MPI_IN_PLACE, &reused, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    tap_ok(ok, "after free and re-allocation (address reused on some rank: %s) the new data is "
               "reduced, not the old mapping's", reused ? "yes" : "no");

    /* more buffers than the cache holds, twice over: evictions, then mappings made again */
    for (int i = 0; i < MANY; ++i) {
        dev_mem_alloc(&many[i], COUNT * sizeof(int32_t));
    }
    ok = 1;
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < MANY; ++i) {
            fill(many[i], 10 + i + pass * MANY);
            ok = ok && check_round(many[i], r, 10 + i + pass * MANY);
        }
    }
    tap_ok(ok, "%d distinct buffers, twice: every result right through evictions", MANY);

    /* and the freed-and-reallocated buffer once more, after all that churn */
    fill(s, 3);
    tap_ok(check_round(s, r, 3), "the re-allocated buffer is still served right");

    for (int i = 0; i < MANY; ++i) {
        dev_mem_free(many[i]);
    }
    dev_mem_free(s);
    dev_mem_free(r);
    MPI_Finalize();
    return tap_failures() ? 1 : 0;
}
