/*
 * test_kinds.c - every rank changes the kind of its buffers from one call to the next, and
 * frees each buffer after its call, so that one virtual address serves as plain host, pinned
 * host, device, pool and managed memory in turn.  The classification must follow (issue 8: a
 * stale "host" answer for an address that had become device memory sent a device pointer to
 * host code, SIGSEGV).
 *
 * Kinds: plain (malloc; above M_MMAP_THRESHOLD, so its free is an munmap that Open MPI's memory
 * hooks see), pinned (dev_host_alloc: driver-known host memory), device (dev_mem_alloc), pool
 * (dev_mem_alloc_pool: device memory that the IPC cannot export) and managed.
 *
 * Collectives: allreduce, bcast, gather, gatherv, scatter, scatterv, alltoallv, alltoallw,
 * reduce_scatter and scan, on random int32 data checked against a reference computed here, with
 * poisoned outputs (gaps included).  One TAP line per collective and phase.
 *
 * Address reuse is made to happen in two ways (the emulated backend in address-reuse mode,
 * COLL_GPU_EMULATED_REUSE=1, set here before MPI_Init):
 *   phase "driver"  one size for every buffer: a freed allocation of the device layer leaves its
 *                   addresses reserved, and the next allocation of any kind takes them, with no
 *                   munmap, as the CUDA driver hands freed pinned memory to cudaMalloc;
 *   phase "munmap"  calls in pairs, plain memory then a kind of the device layer, of one size
 *                   new to the pair: the kernel hands the pages that free() unmapped to the
 *                   device allocation.
 * Every rank records which kind each buffer's first page had; the run goes on (up to a limit)
 * until plain -> device/pool/managed and pinned -> device/pool/managed reuses have both been
 * seen, and fails saying so if they never are.
 *
 * Usage: test_kinds [--mixed] [--expect-cache=on|off|any]
 *   --mixed   ranks pass different kinds in one call (run with coll_gpu_uniform_buffers=false);
 *             without it every rank uses the same kind in a call
 *   --expect-cache  whether the classification cache must be on in every rank (coll/gpu turns
 *             it on when Open MPI's memory hooks see munmap); on checks too that it served plain
 *             pages and that the hooks reported releases
 */
#define _GNU_SOURCE
#include "mpitest.h"

#include <malloc.h>

enum { K_PLAIN, K_PINNED, K_DEVICE, K_POOL, K_MANAGED, K_COUNT };
static const char *const kind_names[K_COUNT] = {"plain", "pinned", "device", "pool", "managed"};

#define PAGE 4096
#define BASE_MAP (128 * 1024) /* a buffer's pages in phase "driver" */
#define MAX_MAP (BASE_MAP + 64 * PAGE) /* the largest buffer of phase "munmap" */
#define COUNT 2048            /* elements per block: n blocks and gaps fit BASE_MAP - PAGE */
#define POISON ((int32_t) 0x7f7f7f7f)
#define ROUNDS 3              /* rounds of every collective per phase, at least */
#define MAX_EXTRA_ROUNDS 20

static int mixed = 0;
static uint64_t call_no = 0;

/* ---- buffers ------------------------------------------------------------------------------ */

typedef struct {
    void *p;
    int kind;
    size_t usable; /* bytes */
} buf_t;

/* Which kind each recently seen first page had, and the reuses across kinds counted. */
#define SEEN 512
static struct {
    uintptr_t page;
    int kind;
} seen[SEEN];
static int nseen = 0;
static long reuse[K_COUNT][K_COUNT];

static void note_page(const void *p, int kind)
{
    uintptr_t page = (uintptr_t) p / PAGE;
    for (int i = 0; i < nseen; ++i) {
        if (seen[i].page == page) {
            if (seen[i].kind != kind) {
                ++reuse[seen[i].kind][kind];
            }
            seen[i].kind = kind;
            return;
        }
    }
    if (SEEN == nseen) {
        memmove(&seen[0], &seen[1], (SEEN - 1) * sizeof(seen[0]));
        --nseen;
    }
    seen[nseen].page = page;
    seen[nseen].kind = kind;
    ++nseen;
}

/* A buffer of map_size pages' worth: the device layer's kinds get exactly map_size bytes, plain
 * memory one page less (malloc's header takes it back: its mapping is then map_size too, so
 * that the kernel can hand it on whole).  Usable bytes: map_size - PAGE for every kind. */
static int buf_alloc(buf_t *b, int kind, size_t map_size)
{
    int rc = DEV_OK;
    b->kind = kind;
    b->usable = map_size - PAGE;
    b->p = NULL;
    switch (kind) {
    case K_PLAIN:
        b->p = malloc(map_size - PAGE);
        break;
    case K_PINNED:
        rc = dev_host_alloc(&b->p, map_size);
        break;
    case K_DEVICE:
        rc = dev_mem_alloc(&b->p, map_size);
        break;
    case K_POOL:
        rc = dev_mem_alloc_pool(&b->p, map_size);
        break;
    case K_MANAGED:
        rc = dev_mem_alloc_managed(&b->p, map_size);
        break;
    }
    if (DEV_OK != rc || NULL == b->p) {
        return -1;
    }
    note_page(b->p, kind);
    return 0;
}

static void buf_free(buf_t *b)
{
    if (NULL == b->p) {
        return;
    }
    switch (b->kind) {
    case K_PLAIN:
        free(b->p);
        break;
    case K_PINNED:
        dev_host_free(b->p);
        break;
    default:
        dev_mem_free(b->p);
        break;
    }
    b->p = NULL;
}

/* dev_memcpy copies between any two kinds; host code never touches device or pool memory. */
static int put(buf_t *b, const int32_t *src, size_t n)
{
    return DEV_OK == dev_memcpy(b->p, src, n * sizeof(int32_t)) ? 0 : -1;
}

static int get(int32_t *dst, const buf_t *b, size_t n)
{
    return DEV_OK == dev_memcpy(dst, b->p, n * sizeof(int32_t)) ? 0 : -1;
}

static int poison(buf_t *b, size_t n, int32_t *scratch)
{
    for (size_t i = 0; i < n; ++i) {
        scratch[i] = POISON;
    }
    return put(b, scratch, n);
}

/* ---- data --------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Element i of rank r's input in this call: non-zero, small enough that sums of a few ranks
 * stay far from the poison. */
static int32_t value(int r, size_t i)
{
    uint64_t v = mix(call_no * 0x9E3779B97F4A7C15ull + (uint64_t) r * 1000003u + i + 1);
    int32_t x = (int32_t) (v % 20001) - 10000;
    return 0 == x ? 1 : x;
}

static void fill(int32_t *dst, int r, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        dst[i] = value(r, i);
    }
}

/* ---- one call ----------------------------------------------------------------------------- */

typedef enum {
    C_ALLREDUCE,
    C_BCAST,
    C_GATHER,
    C_GATHERV,
    C_SCATTER,
    C_SCATTERV,
    C_ALLTOALLV,
    C_ALLTOALLW,
    C_REDUCE_SCATTER,
    C_SCAN,
    C_COUNT
} coll_t;

static const char *const coll_names[C_COUNT] = {
    "allreduce", "bcast", "gather", "gatherv", "scatter",
    "scatterv", "alltoallv", "alltoallw", "reduce_scatter", "scan"};

static int32_t *want, *got, *tmp, *in;

/* Blocks of the v collectives: rank r's count toward/from peer p, never zero. */
static int vcount(int r, int p)
{
    return COUNT / 2 + (int) ((r * 7 + p * 3) % 11) * 17;
}

/* Compare n elements; on a difference describe the first one in diag. */
static int compare(const int32_t *w, const int32_t *g, size_t n, char *diag, const char *what)
{
    for (size_t i = 0; i < n; ++i) {
        if (w[i] != g[i]) {
            mt_diag_add(diag, "%s: element %zu is %d, expected %d; ", what, i, (int) g[i],
                        (int) w[i]);
            return 0;
        }
    }
    return 1;
}

/* Run one collective with a send buffer of kind sk and a receive buffer of kind rk, both of
 * map_size, freed when it returns; check the result.  Returns 1 when right on this rank. */
static int run_one(coll_t c, int sk, int rk, size_t map_size, char *diag)
{
    int me = mt_rank, n = mt_size, root = (int) (call_no % (uint64_t) n), ok = 1, rc = MPI_SUCCESS;
    bool has_send, has_recv;
    int scounts[64], sdispls[64], rcounts[64], rdispls[64];
    MPI_Datatype types[64];
    size_t rn = 0, off;
    buf_t s = {0}, r = {0};

    for (int p = 0; p < n; ++p) {
        types[p] = MPI_INT;
    }
    /* buffers where they are significant: no send buffer in bcast nor at scatter's
     * non-roots, no receive buffer at gather's non-roots (NULL is passed there) */
    has_send = C_BCAST != c && (me == root || (C_SCATTER != c && C_SCATTERV != c));
    has_recv = me == root || (C_GATHER != c && C_GATHERV != c);
    if ((has_send && 0 != buf_alloc(&s, sk, map_size))
        || (has_recv && 0 != buf_alloc(&r, rk, map_size))) {
        mt_diag_add(diag, "%s: allocating %s/%s memory failed: %s; ", coll_names[c],
                    kind_names[sk], kind_names[rk], dev_error_string());
        buf_free(&s);
        return 0;
    }
    if (NULL != r.p) {
        poison(&r, r.usable / sizeof(int32_t), tmp);
    }

    switch (c) {
    case C_ALLREDUCE:
    case C_SCAN:
        fill(in, me, COUNT);
        put(&s, in, COUNT);
        rc = C_ALLREDUCE == c
                 ? MPI_Allreduce(s.p, r.p, COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                 : MPI_Scan(s.p, r.p, COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < COUNT; ++i) {
            int32_t v = 0;
            for (int p = 0; p < (C_ALLREDUCE == c ? n : me + 1); ++p) {
                v += value(p, i);
            }
            want[i] = v;
        }
        rn = COUNT;
        break;
    case C_BCAST:
        fill(want, root, COUNT);
        if (me == root) {
            put(&r, want, COUNT);
        }
        rc = MPI_Bcast(r.p, COUNT, MPI_INT, root, MPI_COMM_WORLD);
        rn = COUNT;
        break;
    case C_GATHER:
    case C_GATHERV:
        fill(in, me, COUNT);
        put(&s, in, COUNT);
        off = 0;
        for (int p = 0; p < n; ++p) {
            rcounts[p] = C_GATHER == c ? COUNT : vcount(p, root);
            rdispls[p] = (int) off + (C_GATHER == c ? 0 : 3); /* gaps stay poisoned */
            off = (size_t) rdispls[p] + (size_t) rcounts[p];
        }
        rc = C_GATHER == c
                 ? MPI_Gather(s.p, COUNT, MPI_INT, r.p, COUNT, MPI_INT, root, MPI_COMM_WORLD)
                 : MPI_Gatherv(s.p, vcount(me, root), MPI_INT, r.p, rcounts, rdispls, MPI_INT,
                               root, MPI_COMM_WORLD);
        if (me == root) {
            rn = off;
            for (size_t i = 0; i < rn; ++i) {
                want[i] = POISON;
            }
            for (int p = 0; p < n; ++p) {
                for (int i = 0; i < rcounts[p]; ++i) {
                    want[rdispls[p] + i] = value(p, (size_t) i);
                }
            }
        }
        break;
    case C_SCATTER:
    case C_SCATTERV:
        off = 0;
        for (int p = 0; p < n; ++p) {
            scounts[p] = C_SCATTER == c ? COUNT : vcount(root, p);
            sdispls[p] = (int) off + (C_SCATTER == c ? 0 : 5);
            off = (size_t) sdispls[p] + (size_t) scounts[p];
        }
        if (me == root) {
            for (size_t i = 0; i < off; ++i) {
                in[i] = POISON; /* the gaps: never sent */
            }
            for (int p = 0; p < n; ++p) {
                for (int i = 0; i < scounts[p]; ++i) {
                    in[sdispls[p] + i] = value(p, (size_t) i);
                }
            }
            put(&s, in, off);
        }
        rc = C_SCATTER == c
                 ? MPI_Scatter(s.p, COUNT, MPI_INT, r.p, COUNT, MPI_INT, root, MPI_COMM_WORLD)
                 : MPI_Scatterv(s.p, scounts, sdispls, MPI_INT, r.p, scounts[me], MPI_INT, root,
                                MPI_COMM_WORLD);
        rn = (size_t) scounts[me] + 7;
        for (size_t i = 0; i < rn; ++i) {
            want[i] = (i < (size_t) scounts[me]) ? value(me, i) : POISON;
        }
        break;
    case C_ALLTOALLV:
    case C_ALLTOALLW: {
        /* block from p to q: vcount(p, q) / 4 elements, value(p, q * COUNT + i) */
        size_t soff = 0, roff = 0;
        for (int p = 0; p < n; ++p) {
            scounts[p] = vcount(me, p) / 4;
            sdispls[p] = (int) soff + 2;
            soff = (size_t) sdispls[p] + (size_t) scounts[p];
            rcounts[p] = vcount(p, me) / 4;
            rdispls[p] = (int) roff + 1;
            roff = (size_t) rdispls[p] + (size_t) rcounts[p];
        }
        for (size_t i = 0; i < soff; ++i) {
            in[i] = POISON;
        }
        for (int p = 0; p < n; ++p) {
            for (int i = 0; i < scounts[p]; ++i) {
                in[sdispls[p] + i] = value(me, (size_t) p * COUNT + (size_t) i);
            }
        }
        put(&s, in, soff);
        if (C_ALLTOALLV == c) {
            rc = MPI_Alltoallv(s.p, scounts, sdispls, MPI_INT, r.p, rcounts, rdispls, MPI_INT,
                               MPI_COMM_WORLD);
        } else {
            int sb[64], rb[64];
            for (int p = 0; p < n; ++p) {
                sb[p] = sdispls[p] * (int) sizeof(int32_t);
                rb[p] = rdispls[p] * (int) sizeof(int32_t);
            }
            rc = MPI_Alltoallw(s.p, scounts, sb, types, r.p, rcounts, rb, types, MPI_COMM_WORLD);
        }
        rn = roff;
        for (size_t i = 0; i < rn; ++i) {
            want[i] = POISON;
        }
        for (int p = 0; p < n; ++p) {
            for (int i = 0; i < rcounts[p]; ++i) {
                want[rdispls[p] + i] = value(p, (size_t) me * COUNT + (size_t) i);
            }
        }
        break;
    }
    case C_REDUCE_SCATTER: {
        size_t total = 0, mine = 0;
        for (int p = 0; p < n; ++p) {
            rcounts[p] = vcount(p, p) / 2;
            if (p < me) {
                mine += (size_t) rcounts[p];
            }
            total += (size_t) rcounts[p];
        }
        fill(in, me, total);
        put(&s, in, total);
        rc = MPI_Reduce_scatter(s.p, r.p, rcounts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        rn = (size_t) rcounts[me] + 3;
        for (size_t i = 0; i < rn; ++i) {
            int32_t v = 0;
            for (int p = 0; p < n; ++p) {
                v += value(p, mine + i);
            }
            want[i] = (i < (size_t) rcounts[me]) ? v : POISON;
        }
        break;
    }
    default:
        break;
    }

    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s (send %s, receive %s): %s; ", coll_names[c], kind_names[sk],
                    kind_names[rk], mt_mpi_error(rc));
        ok = 0;
    } else if (rn > 0 && NULL != r.p) {
        char what[96];
        snprintf(what, sizeof(what), "%s (send %s, receive %s, call %llu)", coll_names[c],
                 kind_names[sk], kind_names[rk], (unsigned long long) call_no);
        if (0 != get(got, &r, rn)) {
            mt_diag_add(diag, "%s: copying the result out failed; ", what);
            ok = 0;
        } else {
            ok = compare(want, got, rn, diag, what);
        }
    }
    buf_free(&s);
    buf_free(&r);
    return ok;
}

/* ---- schedules ---------------------------------------------------------------------------- */

static const int driver_cycle[] = {K_PINNED, K_DEVICE, K_PLAIN, K_POOL, K_PINNED, K_MANAGED,
                                   K_DEVICE, K_PINNED, K_POOL, K_MANAGED, K_PLAIN};
static const int layer_kinds[] = {K_DEVICE, K_POOL, K_MANAGED, K_PINNED};
#define NCYCLE (int) (sizeof(driver_cycle) / sizeof(driver_cycle[0]))

/* One round of every collective.  phase 0: "driver" (one size, reuse through the device
 * layer's reservations); phase 1: "munmap" (pairs: plain then a device-layer kind, a size new
 * to the pair).  With --mixed, send and receive kinds differ by one step of the cycle too. */
static int round_of(int phase, int round, int fails[C_COUNT], char diags[C_COUNT][MT_DIAG_LEN])
{
    static int pair = 0;
    for (int c = 0; c < C_COUNT; ++c) {
        char name[160];
        int sk, rk, ok;
        size_t map_size = BASE_MAP;
        int step = (int) call_no + (mixed ? mt_rank : 0);

        if (0 == phase) {
            /* with the same kind on every rank, send and receive buffers agree too (the root
             * of gather and scatter would otherwise see other kinds than the rest) */
            sk = driver_cycle[step % NCYCLE];
            rk = driver_cycle[(step + (mixed ? 1 : 0)) % NCYCLE];
        } else {
            /* two calls per pair: every rank passes plain memory in one and memory of the
             * device layer in the other (in --mixed, odd ranks the other way round) */
            int second = (int) (call_no & 1) ^ (mixed ? (mt_rank & 1) : 0);
            map_size = BASE_MAP + (size_t) PAGE * (size_t) (1 + pair % 48);
            sk = rk = second ? layer_kinds[(pair + (mixed ? mt_rank : 0)) % 4] : K_PLAIN;
            if (call_no & 1) {
                ++pair;
            }
        }
        snprintf(name, sizeof(name), "%s, phase %s, round %d, call %llu", coll_names[c],
                 0 == phase ? "driver" : "munmap", round, (unsigned long long) call_no);
        mt_set_case(name);
        ok = run_one((coll_t) c, sk, rk, map_size, diags[c]);
        alarm(0);
        fails[c] += !ok;
        ++call_no;
    }
    return 0;
}

static void report(int phase, int fails[C_COUNT], char diags[C_COUNT][MT_DIAG_LEN], int rounds)
{
    for (int c = 0; c < C_COUNT; ++c) {
        mt_check(0 == fails[c], diags[c], "%s on changing buffer kinds (%s), phase %s: %d "
                 "rounds right", coll_names[c], mixed ? "ranks mix kinds" : "same kind per call",
                 0 == phase ? "driver reuse" : "munmap reuse", rounds);
    }
}

/* Reuses seen on all ranks together: plain -> device/pool/managed, pinned -> the same. */
static void reuse_totals(long *plain_to_layer, long *pinned_to_device)
{
    long mine[2] = {0, 0}, all[2] = {0, 0};
    for (int k = K_DEVICE; k < K_COUNT; ++k) {
        mine[0] += reuse[K_PLAIN][k];
    }
    for (int k = K_DEVICE; k < K_COUNT; ++k) {
        mine[1] += reuse[K_PINNED][k];
    }
    MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    *plain_to_layer = all[0];
    *pinned_to_device = all[1];
}

int main(int argc, char **argv)
{
    const char *expect = "any";
    char why[256], diag[MT_DIAG_LEN];
    int fails[2][C_COUNT] = {{0}};
    static char diags[2][C_COUNT][MT_DIAG_LEN];
    int rounds[2] = {0, 0};
    long plain_to_layer = 0, pinned_to_device = 0;
    dev_classify_stats_t st;

    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "--mixed")) {
            mixed = 1;
        } else if (0 == strncmp(argv[i], "--expect-cache=", 15)) {
            expect = argv[i] + 15;
        }
    }
    /* before MPI_Init: coll/gpu opens the device layer there */
    setenv("COLL_GPU_EMULATED_REUSE", "1", 0);
    /* plain buffers above this come from mmap and go back with munmap */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    mt_init(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (mt_size > 64) {
        mt_skip_all("at most 64 ranks");
    }
    /* allocated once, before any case: they must not take the addresses being reused */
    want = malloc(MAX_MAP);
    got = malloc(MAX_MAP);
    tmp = malloc(MAX_MAP);
    in = malloc(MAX_MAP);

    if (0 != strcmp(expect, "any")) {
        int on = dev_mem_classify_cache_enabled(), want_on = 0 == strcmp(expect, "on");
        diag[0] = '\0';
        mt_diag_add(diag, "the cache is %s", on ? "on" : "off");
        mt_check(on == want_on, diag, "the classification cache is %s in every rank", expect);
    }

    for (int phase = 0; phase < 2; ++phase) {
        for (int r = 0; r < ROUNDS; ++r) {
            round_of(phase, rounds[phase]++, fails[phase], diags[phase]);
        }
    }
    /* go on until both reuses have happened somewhere */
    for (int extra = 0; extra < MAX_EXTRA_ROUNDS; ++extra) {
        reuse_totals(&plain_to_layer, &pinned_to_device);
        if (plain_to_layer > 0 && pinned_to_device > 0) {
            break;
        }
        if (0 == pinned_to_device) {
            round_of(0, rounds[0]++, fails[0], diags[0]);
        }
        if (0 == plain_to_layer) {
            round_of(1, rounds[1]++, fails[1], diags[1]);
        }
    }
    reuse_totals(&plain_to_layer, &pinned_to_device);
    report(0, fails[0], diags[0], rounds[0]);
    report(1, fails[1], diags[1], rounds[1]);

    diag[0] = '\0';
    mt_check(pinned_to_device > 0, NULL,
             "an address of pinned memory was reused by device, pool or managed memory (%ld "
             "times over all ranks)", pinned_to_device);
    mt_check(plain_to_layer > 0, NULL,
             "an address of plain malloc memory was reused by device, pool or managed memory "
             "(%ld times over all ranks)", plain_to_layer);
    if (0 == strcmp(expect, "on")) {
        dev_mem_classify_stats(&st);
        diag[0] = '\0';
        mt_diag_add(diag, "%llu pages stored, %llu releases reported",
                    (unsigned long long) st.stores, (unsigned long long) st.forgets);
        mt_check(st.stores > 0 && st.forgets > 0, diag,
                 "the cache served plain pages and the memory hooks reported releases");
    }
    free(want);
    free(got);
    free(tmp);
    free(in);
    return mt_finish();
}
