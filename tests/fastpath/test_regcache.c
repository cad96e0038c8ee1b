/*
 * test_regcache.c - the zero-copy allreduces' registration cache must never serve a stale
 * mapping: a buffer freed and allocated again at the same address carries a new buffer id, so
 * peers map the new allocation.  Also runs more distinct buffers than the cache holds, so that
 * least-recently-used mappings are evicted and mapped again.
 *
 * The stale-mapping check needs the allocator to hand an address back: the program frees and
 * allocates again, each time after the peers have mapped (and cached) the buffer, until some
 * rank gets its old address back; when that does not happen within REUSE_TRIES rounds the
 * check fails, saying so, rather than passing without having tested anything.
 *
 * The driver keeps one mapping of a peer's allocation per process, not per communicator: a
 * buffer mapped through one communicator, freed and allocated again at the same address, must
 * then be mappable through another communicator that never saw the old allocation (the first
 * communicator's stale mapping is closed; the driver refuses the new one otherwise with
 * cudaErrorAlreadyMapped, and the emulated backend refuses it the same way).
 *
 * Run with coll_gpu_allreduce_algorithm=twoshot or oneshot (zero-copy: peers read this rank's
 * own buffers through IPC), on the emulated backend (fastpath/regcache*.sh) or on cuda
 * (gpu/regcache_cuda.sh).  Every round uses fresh data, so a stale mapping shows as a wrong
 * sum.  Exit: TAP.
 */
#include "mpi/mpitest.h"

#define COUNT 4099 /* odd: uneven two-shot chunks */
#define MANY 80    /* more than the cache's 64 entries */
#define REUSE_TRIES 64

/* Rank r's element i in round round (all ranks can compute every rank's input). */
static int32_t value(int r, int round, int i)
{
    return (int32_t) ((r + 1) * 1000 + round * 7 + i % 97);
}

/* Fill a device buffer with round-dependent data; 1 on success. */
static int fill(void *dev, int round)
{
    int32_t host[COUNT];
    for (int i = 0; i < COUNT; ++i) {
        host[i] = value(mt_rank, round, i);
    }
    return NULL != dev && DEV_OK == dev_memcpy(dev, host, sizeof(host));
}

/* Allreduce sbuf into rbuf (poisoned first) and compare with the sum computed here.  setup_ok
 * is this rank's verdict on filling sbuf: the ranks agree on it before the collective, so that a
 * rank whose set-up failed does not leave its peers waiting in the allreduce. */
static int check_round_on(MPI_Comm comm, int setup_ok, void *sbuf, void *rbuf, int round)
{
    int32_t got[COUNT];
    int bad = 0;

    memset(got, 0xA5, sizeof(got));
    setup_ok = setup_ok && NULL != rbuf && DEV_OK == dev_memcpy(rbuf, got, sizeof(got));
    if (!mt_agree(setup_ok)) {
        tap_diag("rank %d round %d: buffer set-up failed on some rank (here: %s)", mt_rank, round,
                 setup_ok ? "no" : dev_error_string());
        return 0;
    }
    if (MPI_SUCCESS != MPI_Allreduce(sbuf, rbuf, COUNT, MPI_INT32_T, MPI_SUM, comm)
        || DEV_OK != dev_memcpy(got, rbuf, sizeof(got))) {
        bad = 1;
    }
    for (int i = 0; !bad && i < COUNT; ++i) {
        int32_t want = 0;
        for (int r = 0; r < mt_size; ++r) {
            want += value(r, round, i);
        }
        if (got[i] != want) {
            tap_diag("rank %d round %d: element %d is %d, want %d", mt_rank, round, i, got[i],
                     want);
            bad = 1;
        }
    }
    return mt_agree(!bad);
}

static int check_round(int setup_ok, void *sbuf, void *rbuf, int round)
{
    return check_round_on(MPI_COMM_WORLD, setup_ok, sbuf, rbuf, round);
}

/* Map s through WORLD only, free it, allocate again until some rank's address comes back, and
 * reduce the new allocation through dup first (whose team never mapped the old one).  1 when
 * every result was right and the reuse happened; *s is the last allocation. */
static int stale_across_comms(MPI_Comm dup, void **s, void *r, int *tries_out)
{
    int ok = 1, reused = 0, ranks_reused = 0, tries = 0, rnd = 5000;
    void *old_s;

    while (ok && !reused && tries < REUSE_TRIES) {
        ++tries;
        ++rnd;
        ok = check_round(fill(*s, rnd), *s, r, rnd);
        old_s = *s;
        dev_mem_free(*s);
        *s = NULL;
        ok = DEV_OK == dev_mem_alloc(s, COUNT * sizeof(int32_t)) && ok;
        reused = ok && (*s == old_s);
        MPI_Allreduce(&reused, &ranks_reused, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        reused = ranks_reused > 0;
        ++rnd;
        ok = check_round_on(dup, ok && fill(*s, rnd), *s, r, rnd);
    }
    *tries_out = tries;
    return ok && reused;
}

int main(int argc, char **argv)
{
    char why[300];
    void *s = NULL, *r = NULL, *old_s;
    void *many[MANY] = {NULL};
    int ok, round = 1, tries = 0, reused = 0, ranks_reused = 0;

    mt_init(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }

    ok = DEV_OK == dev_mem_alloc(&s, COUNT * sizeof(int32_t))
         && DEV_OK == dev_mem_alloc(&r, COUNT * sizeof(int32_t));
    ok = tap_ok(check_round(ok && fill(s, round), s, r, round),
                "zero-copy allreduce on fresh buffers");

    /* Free and allocate again (same size, so the allocator tends to hand the address back),
     * each time after an allreduce that made the peers map and cache the buffer, until some
     * rank's address comes back. */
    while (ok && !reused && tries < REUSE_TRIES) {
        ++tries;
        old_s = s;
        dev_mem_free(s);
        s = NULL;
        ok = DEV_OK == dev_mem_alloc(&s, COUNT * sizeof(int32_t));
        reused = ok && (s == old_s);
        MPI_Allreduce(&reused, &ranks_reused, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        reused = ranks_reused > 0;
        ++round;
        /* this allreduce is the stale-mapping check once the address came back, and the one
         * that makes the peers cache the new buffer otherwise */
        ok = check_round(ok && fill(s, round), s, r, round);
    }
    if (!reused) {
        tap_diag("no rank got its freed address back in %d free/allocate rounds", tries);
    }
    tap_ok(reused, "the allocator reused a freed address (on %d rank(s), after %d free/allocate "
                   "round(s)), so the next check is the stale-mapping one", ranks_reused, tries);
    tap_ok(ok && reused, "after free and re-allocation at the same address the new data is "
                         "reduced, not the old mapping's");

    /* more buffers than the cache holds, twice over: evictions, then mappings made again */
    ok = 1;
    for (int i = 0; i < MANY; ++i) {
        ok = ok && DEV_OK == dev_mem_alloc(&many[i], COUNT * sizeof(int32_t));
    }
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < MANY; ++i) {
            int rnd = 1000 + i + pass * MANY;
            ok = check_round(ok && fill(many[i], rnd), many[i], r, rnd) && ok;
        }
    }
    tap_ok(ok, "%d distinct buffers, twice: every result right through evictions", MANY);

    /* and the freed-and-reallocated buffer once more, after all that churn */
    tap_ok(check_round(fill(s, 3000), s, r, 3000), "the re-allocated buffer is still served right");

    {
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        ok = stale_across_comms(dup, &s, r, &tries);
        tap_ok(ok, "a buffer mapped through one communicator, freed and allocated again at the "
                   "same address, is reduced right through another (%d round(s))", tries);
        tap_ok(check_round(fill(s, 6000), s, r, 6000),
               "... and then through the first communicator again");
        MPI_Comm_free(&dup);
    }

    for (int i = 0; i < MANY; ++i) {
        if (NULL != many[i]) {
            dev_mem_free(many[i]);
        }
    }
    if (NULL != s) {
        dev_mem_free(s);
    }
    if (NULL != r) {
        dev_mem_free(r);
    }
    return mt_finish();
}
