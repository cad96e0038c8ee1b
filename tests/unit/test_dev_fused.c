/*
 * test_dev_fused.c - dev_fused_allreduce, the one-kernel allreduce of the fast path, without
 * MPI: n threads of one process play n ranks, each with its own scratch, stream and mapped done
 * word, and run calls with increasing sequence numbers (both slot parities, flags reused) over
 * types, ops, counts that cross the kernel's block ranges, launch shapes, in place and not.
 * Inputs are a pure function of (call, rank, index); every rank checks its own result, after
 * poisoning it, against the fold of all inputs in rank order (binary16 and bfloat16: in float,
 * rounded once) by the independent oracle of
 * test_dev_oracle.h (not dev_reduce_host: that is kernels/reference.c, the very code the
 * emulated backend runs, whose mistakes it would repeat).  Then the
 * abandon path: a rank whose peer never comes is released (emulated: its abandon callback;
 * cuda: its host writes seq | DEV_FUSED_ABANDON into its flags) and leaves rbuf untouched.
 *
 * Runs on the emulated backend always, and on the cuda backend too when a GPU is visible (on
 * the GPU machine: tests/gpu/device-run.sh runs every unit test), where two kernels of one
 * process on one GPU wait for each other through the same flags as two processes would.
 */
#include "dev.h"
#include "tap.h"
#include "test_dev_oracle.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NMAX 4
#define CAP ((size_t) 64 << 10) /* bytes of one rank's area in a slot */
#define SLOT (DEV_FUSED_HEAD_BYTES(NMAX) + NMAX * CAP)
#define WAIT_S 20.0             /* a call that takes longer has hung */

typedef struct {
    dev_dtype_t dtype;
    dev_op_t op;
} combo_t;

static const combo_t combos[] = {
    {DEV_T_FLOAT, DEV_OP_SUM},   {DEV_T_DOUBLE, DEV_OP_PROD}, {DEV_T_INT32, DEV_OP_MAX},
    {DEV_T_UINT8, DEV_OP_BXOR},  {DEV_T_INT16, DEV_OP_SUM},   {DEV_T_INT64, DEV_OP_MIN},
    {DEV_T_CFLOAT, DEV_OP_PROD}, {DEV_T_2INT, DEV_OP_MINLOC}, {DEV_T_DOUBLE_INT, DEV_OP_MAXLOC},
    {DEV_T_BOOL, DEV_OP_LOR},    {DEV_T_FLOAT16, DEV_OP_SUM}, {DEV_T_BFLOAT16, DEV_OP_SUM},
    {DEV_T_FLOAT16, DEV_OP_MAX}, {DEV_T_BFLOAT16, DEV_OP_PROD},
};
static const size_t counts[] = {1, 7, 33, 1023, 4099};
static const int shapes[][2] = {{0, 0}, {1, 64}, {3, 128}, {DEV_FUSED_MAX_BLOCKS, 512}};

typedef struct team team_t;
typedef struct {
    team_t *team;
    int rank;
    void *scratch, *sbuf, *rbuf;
    void *done_host, *done_dev;
    dev_stream_t *stream;
    long wrong, failed;
    char why[256];
} rank_t;

struct team {
    int n;
    rank_t r[NMAX];
    pthread_barrier_t bar;
    uint64_t seq0;
    int skip_rank; /* abandon test: this rank never calls */
};

/* Input element bytes of (call, rank, index): small values so that sums and products stay
 * exact and every op sees ties, signs and zeros (pair types: value, then index).  The 16-bit
 * floats instead take the oracle's random_half (non-integers, subnormals, the top binade where
 * two ranks' sum overflows, now and then a zero, an infinity or a NaN), seeded from the same
 * hash, so that rounding happens and a fold rounded at every step would be caught. */
static void gen(void *out, dev_dtype_t t, dev_op_t op, size_t count, uint64_t call, int rank)
{
    size_t es = dev_dtype_size(t);
    for (size_t i = 0; i < count; ++i) {
        uint64_t h = (call * 1000003u + (uint64_t) rank * 7919u + i * 2654435761u) >> 3;
        long v = (long) (h % 9) - 4;
        char *e = (char *) out + i * es;
        switch (t) {
        case DEV_T_FLOAT: *(float *) e = (float) v * 0.5f; break;
        case DEV_T_DOUBLE: *(double *) e = (double) (v == 0 ? 1 : v) * 0.25; break;
        case DEV_T_CFLOAT: ((float *) e)[0] = (float) v; ((float *) e)[1] = (float) (h % 3); break;
        case DEV_T_2INT: ((int *) e)[0] = (int) v; ((int *) e)[1] = (int) (h % 5); break;
        case DEV_T_DOUBLE_INT:
            memset(e, 0, es);
            *(double *) e = (double) v;
            *(int *) (e + sizeof(double)) = (int) (h % 5);
            break;
        case DEV_T_BOOL: *(unsigned char *) e = (unsigned char) (h & 1); break;
        case DEV_T_FLOAT16:
        case DEV_T_BFLOAT16: {
            /* spread the hash over 64 bits (a splitmix64 finaliser): random_half reads them all */
            uint64_t r = (h + 1) * 0x9e3779b97f4a7c15ull;
            r = (r ^ (r >> 30)) * 0xbf58476d1ce4e5b9ull;
            r = (r ^ (r >> 27)) * 0x94d049bb133111ebull;
            *(uint16_t *) e = random_half(t, op, r ^ (r >> 31));
            break;
        }
        default: memcpy(e, &v, es); break; /* little-endian: the low bytes of v */
        }
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static bool never_abandon(void *ctx)
{
    (void) ctx;
    return false;
}

static bool abandon_after_a_while(void *ctx)
{
    return ++*(int *) ctx > 200;
}

/* One call of one rank: upload, run, wait for the done word (bounded), download, compare. */
static void one_call(rank_t *me, uint64_t seq, const combo_t *c, size_t count, int nb, int nt,
                     bool in_place)
{
    team_t *tm = me->team;
    size_t bytes = count * dev_dtype_size(c->dtype);
    unsigned char *in = malloc(bytes), *got = malloc(bytes), *poison = malloc(bytes);
    unsigned char *inputs[NMAX] = {NULL};
    char why[160];
    dev_fused_allreduce_t a;
    dev_launch_t launch = {nb, nt};
    double t0;
    int rc;

    memset(poison, 0xa5, bytes);
    gen(in, c->dtype, c->op, count, seq, me->rank);
    for (int p = 0; p < tm->n; ++p) {
        inputs[p] = calloc(1, bytes); /* zeroed: pair types' padding */
        gen(inputs[p], c->dtype, c->op, count, seq, p);
    }
    dev_memcpy(me->sbuf, in, bytes);
    if (!in_place) {
        dev_memcpy(me->rbuf, poison, bytes);
    }
    memset(&a, 0, sizeof(a));
    a.sbuf = me->sbuf;
    a.rbuf = in_place ? me->sbuf : me->rbuf;
    a.count = count;
    a.dtype = c->dtype;
    a.op = c->op;
    a.nranks = tm->n;
    a.rank = me->rank;
    for (int p = 0; p < tm->n; ++p) {
        a.slot[p] = (char *) tm->r[p].scratch + (seq & 1) * SLOT;
    }
    a.cap = CAP;
    a.seq = seq;
    a.done = me->done_dev;
    a.abandon = never_abandon;
    rc = dev_fused_allreduce(&a, &launch, me->stream);
    if (DEV_OK != rc) {
        ++me->failed;
        snprintf(me->why, sizeof(me->why), "seq %llu: %s", (unsigned long long) seq,
                 dev_error_string());
        goto out;
    }
    t0 = now();
    while (__atomic_load_n((uint64_t *) me->done_host, __ATOMIC_ACQUIRE) != seq) {
        if (now() - t0 > WAIT_S) {
            ++me->failed;
            snprintf(me->why, sizeof(me->why), "seq %llu: no done word after %.0f s",
                     (unsigned long long) seq, WAIT_S);
            goto out;
        }
        sched_yield();
    }
    dev_stream_sync(me->stream);
    dev_memcpy(got, a.rbuf, bytes);
    /* the oracle compares a pair's value and index, never its padding */
    if (!oracle_multi_check(c->dtype, c->op, (const void *const *) inputs, tm->n, got, count,
                            why, sizeof(why))) {
        if (0 == me->wrong) {
            snprintf(me->why, sizeof(me->why), "seq %llu %s %s count %zu%s: %s",
                     (unsigned long long) seq, dev_dtype_name(c->dtype), dev_op_name(c->op),
                     count, in_place ? " in place" : "", why);
        }
        ++me->wrong;
    }
out:
    free(in);
    free(got);
    free(poison);
    for (int p = 0; p < tm->n; ++p) {
        free(inputs[p]);
    }
}

static void *rank_main(void *arg)
{
    rank_t *me = arg;
    team_t *tm = me->team;
    uint64_t seq = tm->seq0;

    for (size_t k = 0; k < sizeof(combos) / sizeof(combos[0]); ++k) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
            size_t count = counts[c];
            if (count * dev_dtype_size(combos[k].dtype) > CAP) {
                count = CAP / dev_dtype_size(combos[k].dtype); /* a full area */
            }
            for (int in_place = 0; in_place < 2; ++in_place) {
                const int *sh = shapes[(k + c + (size_t) in_place) % 4];
                /* every rank uploads before any starts: a rank's sbuf is its own, but the
                 * barrier keeps the calls in lockstep so a hang is reported per call */
                pthread_barrier_wait(&tm->bar);
                one_call(me, seq++, &combos[k], count, sh[0], sh[1], 0 != in_place);
            }
        }
    }
    return NULL;
}

static int team_open(team_t *tm, int n)
{
    memset(tm, 0, sizeof(*tm));
    tm->n = n;
    for (int p = 0; p < n; ++p) {
        rank_t *r = &tm->r[p];
        r->team = tm;
        r->rank = p;
        if (DEV_OK != dev_mem_alloc(&r->scratch, 2 * SLOT)
            || DEV_OK != dev_memset(r->scratch, 0, 2 * SLOT)
            || DEV_OK != dev_mem_alloc(&r->sbuf, CAP) || DEV_OK != dev_mem_alloc(&r->rbuf, CAP)
            || DEV_OK != dev_host_alloc_mapped(&r->done_host, &r->done_dev, sizeof(uint64_t))
            || DEV_OK != dev_stream_create(&r->stream)) {
            return -1;
        }
        *(uint64_t *) r->done_host = 0;
    }
    return pthread_barrier_init(&tm->bar, NULL, (unsigned) n);
}

static void team_close(team_t *tm)
{
    for (int p = 0; p < tm->n; ++p) {
        rank_t *r = &tm->r[p];
        if (NULL != r->stream) {
            dev_stream_sync(r->stream);
            dev_stream_destroy(r->stream);
        }
        dev_mem_free(r->scratch);
        dev_mem_free(r->sbuf);
        dev_mem_free(r->rbuf);
        if (NULL != r->done_host) {
            dev_host_free(r->done_host);
        }
    }
    pthread_barrier_destroy(&tm->bar);
}

static void run_teams(const char *backend)
{
    for (int n = 2; n <= NMAX; ++n) {
        team_t tm;
        pthread_t th[NMAX];
        long wrong = 0, failed = 0;
        const char *why = "";

        if (!tap_ok(0 == team_open(&tm, n), "%s, %d ranks: scratch, buffers, streams (%s)",
                    backend, n, dev_error_string())) {
            team_close(&tm);
            continue;
        }
        tm.seq0 = 1;
        for (int p = 0; p < n; ++p) {
            pthread_create(&th[p], NULL, rank_main, &tm.r[p]);
        }
        for (int p = 0; p < n; ++p) {
            pthread_join(th[p], NULL);
            wrong += tm.r[p].wrong;
            failed += tm.r[p].failed;
            if ('\0' != tm.r[p].why[0] && '\0' == why[0]) {
                why = tm.r[p].why;
            }
        }
        tap_ok(0 == wrong && 0 == failed,
               "%s, %d ranks: %zu calls per rank (%zu type/op pairs, counts 1..4099 and a full "
               "area, 4 launch shapes, in place and not): %ld wrong results, %ld failed calls "
               "%s",
               backend, n,
               sizeof(combos) / sizeof(combos[0]) * sizeof(counts) / sizeof(counts[0]) * 2,
               sizeof(combos) / sizeof(combos[0]), wrong, failed, why);
        team_close(&tm);
    }
}

/* Rank 1 never comes: rank 0 must be released and leave its rbuf alone. */
static void run_abandon(const char *backend, bool emulated)
{
    team_t tm;
    rank_t *me;
    dev_fused_allreduce_t a;
    float in[64], back[64], poison[64];
    int asked = 0;
    uint64_t seq = 5;
    double t0;
    bool done = false;

    if (!tap_ok(0 == team_open(&tm, 2), "%s, abandon: team of 2", backend)) {
        team_close(&tm);
        return;
    }
    me = &tm.r[0];
    for (int i = 0; i < 64; ++i) {
        in[i] = (float) i;
        poison[i] = -1.0f;
    }
    dev_memcpy(me->sbuf, in, sizeof(in));
    dev_memcpy(me->rbuf, poison, sizeof(poison));
    memset(&a, 0, sizeof(a));
    a.sbuf = me->sbuf;
    a.rbuf = me->rbuf;
    a.count = 64;
    a.dtype = DEV_T_FLOAT;
    a.op = DEV_OP_SUM;
    a.nranks = 2;
    a.rank = 0;
    a.slot[0] = (char *) tm.r[0].scratch + (seq & 1) * SLOT;
    a.slot[1] = (char *) tm.r[1].scratch + (seq & 1) * SLOT;
    a.cap = CAP;
    a.seq = seq;
    a.done = me->done_dev;
    a.abandon = abandon_after_a_while;
    a.abandon_ctx = &asked;
    tap_ok(DEV_OK == dev_fused_allreduce(&a, NULL, me->stream), "%s, abandon: launched",
           backend);
    if (!emulated) {
        /* what coll_gpu_nvl.c does when a peer failed: release our waits through our flags */
        static uint64_t marks[DEV_FUSED_MAX_BLOCKS * DEV_MULTI_MAX];
        for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); ++i) {
            marks[i] = seq | DEV_FUSED_ABANDON;
        }
        dev_memcpy(a.slot[0], marks, sizeof(marks));
    }
    t0 = now();
    while (!(done = (__atomic_load_n((uint64_t *) me->done_host, __ATOMIC_ACQUIRE) == seq))
           && now() - t0 < WAIT_S) {
        sched_yield();
    }
    tap_ok(done, "%s, abandon: the waiting rank is released (done word %llu)", backend,
           (unsigned long long) *(uint64_t *) me->done_host);
    dev_stream_sync(me->stream);
    dev_memcpy(back, me->rbuf, sizeof(back));
    tap_ok(0 == memcmp(back, poison, sizeof(back)), "%s, abandon: rbuf untouched", backend);
    team_close(&tm);
}

int main(void)
{
    int ndev = 0;

    if (!tap_ok(DEV_OK == dev_open(DEV_BACKEND_EMULATED), "open the emulated backend")) {
        return tap_done();
    }
    run_teams("emulated");
    run_abandon("emulated", true);
    dev_close();

    if (DEV_OK == dev_open(DEV_BACKEND_CUDA) && DEV_OK == dev_device_count(&ndev) && ndev > 0) {
        run_teams("cuda");
        run_abandon("cuda", false);
        dev_close();
    } else {
        tap_diag("no GPU here: the cuda half runs on the GPU machine");
    }
    return tap_done();
}
