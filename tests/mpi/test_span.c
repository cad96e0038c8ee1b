/*
 * test_span.c - datatypes whose blocks lie in several allocations (issue 19, item 2).
 *
 * Codes that gather fields of a struct of arrays describe them with one hindexed type of
 * absolute addresses and pass MPI_BOTTOM: each block lies in an allocation of its own, and
 * between the blocks lies memory that is no part of the call (other allocations, unmapped
 * address space, or memory of another kind).  Staging must copy the blocks, not the span from
 * the lowest to the highest address, and a type whose lowest block is host memory but which
 * has device blocks must not go to the host collective (host code touching device memory
 * faults: on the emulated device as on a GPU).  First a host block of 1 MiB below a device
 * allocation with 32 one-double blocks (a span of fewer pages than elements: its kind is found
 * page by page), MPI_Bcast.  Then scenarios, one hindexed type of 3 blocks of doubles each (4,
 * 6 and 8 doubles; the same signature on every rank), whose kind is found block by block:
 *
 *   one allocation          the 3 blocks in one device allocation (the common case)
 *   2 allocations, 8 MiB    2 device allocations with 8 MiB of device memory between them
 *   3 allocations           3 device allocations, the type's blocks out of address order
 *   device, host above      2 device allocations and host memory above them
 *   host below, device      host memory below 2 device allocations (the lowest block is host)
 *   host, device, host      host memory on both sides of a device allocation
 *
 * Each field is an array of 64 doubles: the first half sends, the second receives (the receive
 * buffer of a call is MPI_BOTTOM + 32 doubles); every element outside the blocks holds a guard
 * value that no call may change.  Host fields are plain mapped or pinned memory, whichever
 * lies closest to the device memory on the side the scenario asks for.  The spans vary with
 * where the allocators put things (diagnostics print them).  The reductions sum with
 * a user-defined op that walks the blocks (MPI's predefined ops take predefined types only:
 * Open MPI 4.1 refuses a derived type with MPI_SUM, and without its parameter check reduces
 * the first element alone).  Calls: MPI_Bcast, MPI_Allreduce (and in place), MPI_Ibcast,
 * MPI_Iallreduce, MPI_Reduce, MPI_Bcast_init and MPI_Allreduce_init (two starts), and
 * MPI_Allgather from a pointer to the lowest block with the type made relative to it (where
 * that block is device memory: that entry goes by its pointer's kind), and MPI_Allgather and
 * MPI_Iallgather from MPI_BOTTOM into host memory (the entry must find the device blocks of the
 * send side; it handed them to the host collective, which crashed), and MPI_Alltoallw and
 * MPI_Neighbor_alltoallw with MPI_BOTTOM on both sides, each rank's blocks to the next rank
 * (the same crash: mpi4py's testNeighborAlltoallwBottom on device arrays).  Then a rank whose block
 * runs past the end of its device allocation: that rank must return an error (emulated device;
 * on cuda where the copy fails), and no rank may hang.
 *
 * Usage: test_span [--rank0-host]
 *   --rank0-host: rank 0 keeps every field in host memory (its type then has the same
 *   signature), so that the kinds of the ranks differ and the device ranks stage (the first
 *   case is left out).
 */
#include <sys/mman.h>

#include "mpitest.h"

#if OMPI_MAJOR_VERSION < 5
#    include <mpi-ext.h>
#    define MPI_Allreduce_init MPIX_Allreduce_init
#    define MPI_Bcast_init MPIX_Bcast_init
#endif

#define HALF 32          /* doubles of a field's send half; the receive half follows */
#define FIELD (2 * HALF) /* doubles of a field */
#define NB 3             /* blocks of the type */
#define POISON (-500000.0)
#define FILLER_BYTES ((size_t) 8 << 20)
/* spans beyond this are left out: the host collective's temporaries cover the span */
#define MAX_SPAN ((size_t) 1 << 30)

static const int blk_off[NB] = {2, 12, 22};
static const int blk_len[NB] = {4, 6, 8};

typedef enum { W_DEV, W_HOST_BELOW, W_HOST_ABOVE } where_t;

typedef struct {
    const char *name;
    where_t where[NB]; /* where the field of each block lies */
    int alloc[NB];     /* for a device block: which of the device allocations (0, 1, 2) */
    bool filler;       /* 8 MiB of device memory allocated after allocation 0 */
    bool shuffle;      /* the type lists the blocks out of their addresses' order */
} scenario_t;

static const scenario_t scenarios[] = {
    {"one device allocation", {W_DEV, W_DEV, W_DEV}, {0, 0, 0}, false, false},
    {"2 device allocations 8 MiB apart", {W_DEV, W_DEV, W_DEV}, {0, 0, 1}, true, false},
    {"3 device allocations, blocks out of address order", {W_DEV, W_DEV, W_DEV}, {0, 1, 2},
     false, true},
    {"2 device allocations, then host above them", {W_DEV, W_DEV, W_HOST_ABOVE}, {0, 1, 0},
     false, false},
    {"host below, then 2 device allocations", {W_HOST_BELOW, W_DEV, W_DEV}, {0, 0, 1}, false,
     false},
    {"host below, device, host above", {W_HOST_BELOW, W_DEV, W_HOST_ABOVE}, {0, 0, 0}, false,
     false},
};
#define NSCEN ((int) (sizeof(scenarios) / sizeof(scenarios[0])))

typedef enum {
    C_BCAST,
    C_ALLREDUCE,
    C_ALLREDUCE_INPLACE,
    C_IBCAST,
    C_IALLREDUCE,
    C_REDUCE,
    C_BCAST_INIT,
    C_ALLREDUCE_INIT,
    C_ALLGATHER,
    C_ALLGATHER_BOTTOM,
    C_IALLGATHER_BOTTOM,
    C_ALLTOALLW_BOTTOM,
    C_NEIGHBOR_ALLTOALLW_BOTTOM,
    C_COUNT
} coll_t;
static const char *const coll_names[C_COUNT] = {"MPI_Bcast",
                                                "MPI_Allreduce",
                                                "MPI_Allreduce in place",
                                                "MPI_Ibcast",
                                                "MPI_Iallreduce",
                                                "MPI_Reduce",
                                                "MPI_Bcast_init",
                                                "MPI_Allreduce_init",
                                                "MPI_Allgather from the lowest block",
                                                "MPI_Allgather from MPI_BOTTOM",
                                                "MPI_Iallgather from MPI_BOTTOM",
                                                "MPI_Alltoallw at MPI_BOTTOM",
                                                "MPI_Neighbor_alltoallw at MPI_BOTTOM"};

static int rank0_host = 0;
/* --no-overrun: leave out the case that provokes a failing device copy on purpose */
static int no_overrun = 0;
static MPI_Op sum_op;
/* The blocks of this rank's absolute type, for sum_blocks */
static MPI_Aint op_disps[NB];
static int op_lens[NB];

/* inout += in over the blocks of the type (every rank's op sees its own type's layout: the
 * host collective unpacks what peers send into this rank's layout) */
static void sum_blocks(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    MPI_Aint lb, extent;

    MPI_Type_get_extent(*dt, &lb, &extent);
    for (int e = 0; e < *len; ++e) {
        for (int b = 0; b < NB; ++b) {
            const double *x = (const double *) ((const char *) in + e * extent + op_disps[b]);
            double *y = (double *) ((char *) inout + e * extent + op_disps[b]);
            for (int i = 0; i < op_lens[b]; ++i) {
                y[i] += x[i];
            }
        }
    }
}

/* What one rank holds for a scenario: the field of each block and where it lies. */
typedef struct {
    double *field[NB];
    bool dev[NB];
    void *allocs[NB + 1]; /* device allocations (the filler last), NULL when none */
    void *host[6];        /* host candidates: mapped before and after the device memory, and
                           * asked for right below and above it */
    void *pinned[2];      /* pinned candidates, before and after */
    int order[NB];        /* the blocks in the order the type lists them */
    void *lowest;         /* the lowest block's address */
    int lowest_blk;
    size_t span;
} layout_t;

/* The value of rank r's element i of block b in start k of a call. */
static double value(int r, int b, int i, int k)
{
    return (double) (1 + (r * 7 + b * 13 + i * 3 + k * 5) % 50);
}

/* The guard of element i of block b's field (never a value, never the poison). */
static double guard(int b, int i)
{
    return -1000.0 - 100.0 * b - i;
}

static bool in_block(int b, int i)
{
    return i >= blk_off[b] && i < blk_off[b] + blk_len[b];
}

static void *map_host(void)
{
    void *p = mmap(NULL, FIELD * sizeof(double), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return MAP_FAILED == p ? NULL : p;
}

/* bytes of host memory as close below dev_lo (or above dev_hi) as the address space has room:
 * the nearest gap of /proc/self/maps that holds them (other mappings, and a CUDA driver's
 * reservations around its allocations, lie between).  NULL: no gap within MAX_SPAN. */
static void *map_near(uintptr_t dev_lo, uintptr_t dev_hi, bool below, size_t bytes)
{
    uintptr_t prev_end = 4096, best = 0, lo, hi;
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512];
    void *p;

    bytes = (bytes + 4095) & ~(size_t) 4095;
    while (NULL != maps && NULL != fgets(line, sizeof(line), maps)) {
        unsigned long start, end;
        if (2 != sscanf(line, "%lx-%lx", &start, &end)) {
            continue;
        }
        /* the gap [prev_end, start) */
        lo = prev_end;
        hi = start;
        if (hi > lo && hi - lo >= bytes) {
            if (below && lo + bytes <= dev_lo) {
                uintptr_t top = (hi < dev_lo ? hi : dev_lo) & ~(uintptr_t) 4095;
                if (top >= lo + bytes && top - bytes > best) {
                    best = top - bytes; /* the highest room below */
                }
            } else if (!below && hi >= dev_hi + bytes && 0 == best) {
                uintptr_t at = (lo > dev_hi ? lo : dev_hi + 4095) & ~(uintptr_t) 4095;
                if (at + bytes <= hi) {
                    best = at; /* the lowest room above */
                }
            }
        }
        prev_end = end;
    }
    if (NULL != maps) {
        fclose(maps);
    }
    if (0 == best || (below ? dev_lo - best : best - dev_hi) > MAX_SPAN) {
        return NULL;
    }
    p = mmap((void *) best, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if ((void *) best != p) {
        if (MAP_FAILED != p) {
            munmap(p, bytes);
        }
        return NULL;
    }
    return p;
}

/* The host candidate closest to the device memory on the side asked that no block uses yet
 * (NULL: none there). */
static double *pick_host(layout_t *l, uintptr_t dev_lo, uintptr_t dev_hi, bool below)
{
    void *cand[8] = {l->host[0], l->host[1], l->host[2],   l->host[3],
                     l->host[4], l->host[5], l->pinned[0], l->pinned[1]};
    void *best = NULL;

    for (int i = 0; i < 8; ++i) {
        uintptr_t c = (uintptr_t) cand[i];
        bool used = false;
        for (int b = 0; b < NB; ++b) {
            used = used || (void *) l->field[b] == cand[i];
        }
        if (NULL == cand[i] || used) {
            continue;
        }
        if (below && c + FIELD * sizeof(double) <= dev_lo
            && (NULL == best || c > (uintptr_t) best)) {
            best = cand[i];
        }
        if (!below && c >= dev_hi && (NULL == best || c < (uintptr_t) best)) {
            best = cand[i];
        }
    }
    return best;
}

static void layout_free(layout_t *l)
{
    for (int i = 0; i < NB + 1; ++i) {
        mt_kind_free(MT_KIND_DEVICE, l->allocs[i]);
    }
    for (int i = 0; i < 6; ++i) {
        if (NULL != l->host[i]) {
            munmap(l->host[i], FIELD * sizeof(double));
        }
    }
    for (int i = 0; i < 2; ++i) {
        mt_kind_free(MT_KIND_PINNED, l->pinned[i]);
    }
    memset(l, 0, sizeof(*l));
}

/* Make this rank's fields for scenario s; 0 when it can (else why says why). */
static int layout_make(const scenario_t *s, layout_t *l, char *why, size_t len)
{
    bool all_host = rank0_host && 0 == mt_rank;
    uintptr_t dev_lo = UINTPTR_MAX, dev_hi = 0, lo = UINTPTR_MAX, hi = 0;
    int ndev = 0;

    memset(l, 0, sizeof(*l));
    /* host memory mapped before and after the device memory: one lies above it, one below,
     * wherever the allocators place things */
    l->host[0] = map_host();
    l->host[1] = map_host();
    l->pinned[0] = mt_kind_alloc(MT_KIND_PINNED, FIELD * sizeof(double));
    for (int b = 0; b < NB && !all_host; ++b) {
        if (W_DEV != s->where[b]) {
            continue;
        }
        if (NULL == l->allocs[s->alloc[b]]) {
            /* around the filler, allocations too large for the holes earlier scenarios
             * left: fresh address space, in allocation order on both backends */
            l->allocs[s->alloc[b]] = mt_kind_alloc(
                MT_KIND_DEVICE, s->filler ? FILLER_BYTES / 4 : FIELD * sizeof(double));
            if (NULL == l->allocs[s->alloc[b]]) {
                snprintf(why, len, "no device memory for a field: %s", dev_error_string());
                return -1;
            }
            ++ndev;
        }
        l->field[b] = l->allocs[s->alloc[b]];
        l->dev[b] = true;
        if (s->filler && 1 == ndev && NULL == l->allocs[NB]) {
            l->allocs[NB] = mt_kind_alloc(MT_KIND_DEVICE, FILLER_BYTES);
            if (NULL == l->allocs[NB]) {
                snprintf(why, len, "no device memory for the filler: %s", dev_error_string());
                return -1;
            }
        }
        if ((uintptr_t) l->field[b] < dev_lo) {
            dev_lo = (uintptr_t) l->field[b];
        }
        if ((uintptr_t) (l->field[b] + FIELD) > dev_hi) {
            dev_hi = (uintptr_t) (l->field[b] + FIELD);
        }
    }
    l->host[2] = map_host();
    l->host[3] = map_host();
    l->pinned[1] = mt_kind_alloc(MT_KIND_PINNED, FIELD * sizeof(double));
    if (0 < ndev) {
        l->host[4] = map_near(dev_lo, dev_hi, true, FIELD * sizeof(double));
        l->host[5] = map_near(dev_lo, dev_hi, false, FIELD * sizeof(double));
    }
    for (int b = 0; b < NB; ++b) {
        if (all_host) {
            /* one host array for every block (the same signature, another layout) */
            l->field[b] = 0 == b ? l->host[0] : l->field[0];
        } else if (W_HOST_BELOW == s->where[b] || W_HOST_ABOVE == s->where[b]) {
            l->field[b] = pick_host(l, dev_lo, dev_hi, W_HOST_BELOW == s->where[b]);
            if (NULL == l->field[b]) {
                snprintf(why, len, "no host memory %s the device memory here",
                         W_HOST_BELOW == s->where[b] ? "below" : "above");
                return 1;
            }
        }
        if (NULL == l->field[b]) {
            snprintf(why, len, "no host memory for a field");
            return -1;
        }
    }
    for (int b = 0; b < NB; ++b) {
        uintptr_t a = (uintptr_t) (l->field[b] + blk_off[b]);
        if (a < lo) {
            lo = a;
            l->lowest = (void *) a;
            l->lowest_blk = b;
        }
        if (a + (size_t) blk_len[b] * sizeof(double) > hi) {
            hi = a + (size_t) blk_len[b] * sizeof(double);
        }
    }
    l->span = hi - lo;
    return 0;
}

/* Fill every field: the send half's blocks with this rank's values of start k (or the poison),
 * the receive half's blocks with the poison, everything else with guards. */
/* Is block b's field that of an earlier block (which then stands for it)? */
static bool field_seen(const layout_t *l, int b)
{
    for (int d = 0; d < b; ++d) {
        if (l->field[d] == l->field[b]) {
            return true;
        }
    }
    return false;
}

static int layout_fill(const layout_t *l, int k, bool send_values)
{
    double img[FIELD];
    for (int b = 0; b < NB; ++b) {
        /* a field shared by several blocks (one allocation) is written once, all blocks in */
        if (field_seen(l, b)) {
            continue;
        }
        for (int i = 0; i < FIELD; ++i) {
            img[i] = guard(b, i);
        }
        for (int c = b; c < NB; ++c) {
            if (l->field[c] != l->field[b]) {
                continue;
            }
            for (int i = blk_off[c]; i < blk_off[c] + blk_len[c]; ++i) {
                img[i] = send_values ? value(mt_rank, c, i, k) : POISON;
                img[HALF + i] = POISON;
            }
        }
        if (DEV_OK != dev_memcpy(l->field[b], img, sizeof(img))) {
            return -1;
        }
    }
    return 0;
}

/* Compare every field with what it must hold: want_send / want_recv give block c's element i
 * of each half (NULL: the half is as layout_fill left it, with own_k's values). */
typedef double (*want_fn)(int c, int i, int k);
static int layout_check(const layout_t *l, int k, want_fn want_send, want_fn want_recv,
                        bool send_values, char *diag)
{
    double img[FIELD];
    for (int b = 0; b < NB; ++b) {
        if (field_seen(l, b)) {
            continue;
        }
        if (DEV_OK != dev_memcpy(img, l->field[b], sizeof(img))) {
            mt_diag_add(diag, "cannot read field %d back: %s; ", b, dev_error_string());
            return 0;
        }
        for (int i = 0; i < FIELD; ++i) {
            int c = -1, j = i % HALF;
            double want;
            for (int d = b; d < NB; ++d) {
                if (l->field[d] == l->field[b] && in_block(d, j)) {
                    c = d;
                }
            }
            if (0 > c) {
                want = guard(b, i);
            } else if (i < HALF) {
                want = NULL != want_send ? want_send(c, j, k)
                       : send_values     ? value(mt_rank, c, j, k)
                                         : POISON;
            } else {
                want = NULL != want_recv ? want_recv(c, j, k) : POISON;
            }
            if (img[i] != want) {
                mt_diag_add(diag, "field of block %d (%s), element %d: %g, want %g; ", b,
                            l->dev[b] ? "device" : "host", i, img[i], want);
                return 0;
            }
        }
    }
    return 1;
}

static int bcast_root;
static int nranks;

static double want_root(int c, int i, int k)
{
    return value(bcast_root, c, i, k);
}

/* The w collectives: each rank sends its blocks to the next rank and receives the previous
 * rank's into its receive half. */
static double want_left(int c, int i, int k)
{
    return value((mt_rank + nranks - 1) % nranks, c, i, k);
}

/* MPI_Alltoallw (counts 0 but for the neighbours) or MPI_Neighbor_alltoallw on a ring graph,
 * both with MPI_BOTTOM and the absolute type t on each side (the receive side shifted to the
 * receive half): the entry must find the device blocks by the displacements and types, not by
 * the buffer pointer (it handed them to the host collective, which crashed). */
static int w_call(MPI_Datatype t, bool neighbor)
{
    int left = (mt_rank + nranks - 1) % nranks, right = (mt_rank + 1) % nranks, rc;
    /* send side [0, nranks), receive side [nranks, 2 nranks) */
    int *counts = calloc(2 * (size_t) nranks, sizeof(int));
    int *idispls = calloc(2 * (size_t) nranks, sizeof(int));
    MPI_Datatype *types = malloc((size_t) nranks * sizeof(MPI_Datatype));
    MPI_Aint sdispl = 0, rdispl = HALF * sizeof(double);
    MPI_Comm ring;

    rc = (NULL == counts || NULL == idispls || NULL == types) ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    for (int p = 0; MPI_SUCCESS == rc && p < nranks; ++p) {
        types[p] = t;
        idispls[nranks + p] = (int) rdispl;
    }
    if (MPI_SUCCESS == rc && neighbor) {
        int one = 1, weight = 1; /* (MPI_UNWEIGHTED trips gcc's array-size check) */
        rc = MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, &weight, 1, &right,
                                            &weight, MPI_INFO_NULL, 0, &ring);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Neighbor_alltoallw(MPI_BOTTOM, &one, &sdispl, types, MPI_BOTTOM, &one,
                                        &rdispl, types, ring);
            MPI_Comm_free(&ring);
        }
    } else if (MPI_SUCCESS == rc) {
        counts[right] = 1;
        counts[nranks + left] = 1;
        rc = MPI_Alltoallw(MPI_BOTTOM, counts, idispls, types, MPI_BOTTOM, counts + nranks,
                           idispls + nranks, types, MPI_COMM_WORLD);
    }
    free(idispls);
    free(counts);
    free(types);
    return rc;
}

static double want_sum(int c, int i, int k)
{
    double v = 0.0;
    for (int r = 0; r < nranks; ++r) {
        v += value(r, c, i, k);
    }
    return v;
}

/* The type of this rank's blocks: absolute addresses (for MPI_BOTTOM), or relative to base. */
static MPI_Datatype layout_type(const scenario_t *s, layout_t *l, const char *base)
{
    int order[NB], lens[NB];
    MPI_Aint disps[NB];
    MPI_Datatype t;

    for (int b = 0; b < NB; ++b) {
        /* 2, 0, 1: neither rising nor falling addresses, wherever the allocator puts the
         * fields (every rank lists the blocks alike: its block b is its peers' block b) */
        order[b] = s->shuffle ? (b + NB - 1) % NB : b;
    }
    for (int a = 0; a < NB; ++a) {
        int b = order[a];
        l->order[a] = b;
        MPI_Get_address(l->field[b] + blk_off[b], &disps[a]);
        disps[a] -= (MPI_Aint) (uintptr_t) base;
        lens[a] = blk_len[b];
    }
    MPI_Type_create_hindexed(NB, lens, disps, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    if (NULL == base) {
        memcpy(op_disps, disps, sizeof(disps));
        memcpy(op_lens, lens, sizeof(lens));
    }
    return t;
}

#define RECV ((void *) (HALF * sizeof(double))) /* MPI_BOTTOM + the receive half */

/* One call of scenario s; 1 when this rank's part is right. */
static int one_call(const scenario_t *s, layout_t *l, MPI_Datatype t, coll_t c,
                    char *diag)
{
    int root = nranks - 1, rc = MPI_SUCCESS, ok = 1, starts = 1, total = 0;
    MPI_Request req = MPI_REQUEST_NULL;

    for (int b = 0; b < NB; ++b) {
        total += blk_len[b];
    }
    bcast_root = root;
    if (C_BCAST_INIT == c || C_ALLREDUCE_INIT == c) {
        starts = 2;
        if (C_BCAST_INIT == c) {
            rc = MPI_Bcast_init(MPI_BOTTOM, 1, t, root, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
        } else {
            rc = MPI_Allreduce_init(MPI_BOTTOM, RECV, 1, t, sum_op, MPI_COMM_WORLD,
                                    MPI_INFO_NULL, &req);
        }
    }
    if (!mt_agree(MPI_SUCCESS == rc)) {
        mt_diag_add(diag, "init: %s; ", mt_mpi_error(rc));
        if (MPI_REQUEST_NULL != req) {
            MPI_Request_free(&req);
        }
        return 0;
    }
    /* every rank makes as many starts as the others (a verdict agreed after each) */
    for (int k = 0; k < starts && ok; ++k) {
        bool bcast = (C_BCAST == c || C_IBCAST == c || C_BCAST_INIT == c);
        bool values = !bcast || mt_rank == root;
        double *gathered = NULL, *got = NULL;
        int *orders = NULL;
        mt_kind_t gather_kind = (C_ALLGATHER == c) ? MT_KIND_DEVICE : MT_KIND_HOST;

        ok = mt_agree(0 == layout_fill(l, k, values));
        if (!ok) {
            mt_diag_add(diag, "cannot fill the fields: %s; ", dev_error_string());
            break;
        }
        switch (c) {
        case C_BCAST:
            rc = MPI_Bcast(MPI_BOTTOM, 1, t, root, MPI_COMM_WORLD);
            break;
        case C_ALLREDUCE:
            rc = MPI_Allreduce(MPI_BOTTOM, RECV, 1, t, sum_op, MPI_COMM_WORLD);
            break;
        case C_ALLREDUCE_INPLACE:
            rc = MPI_Allreduce(MPI_IN_PLACE, MPI_BOTTOM, 1, t, sum_op, MPI_COMM_WORLD);
            break;
        case C_IBCAST:
            rc = MPI_Ibcast(MPI_BOTTOM, 1, t, root, MPI_COMM_WORLD, &req);
            break;
        case C_IALLREDUCE:
            rc = MPI_Iallreduce(MPI_BOTTOM, RECV, 1, t, sum_op, MPI_COMM_WORLD, &req);
            break;
        case C_REDUCE:
            rc = MPI_Reduce(MPI_BOTTOM, RECV, 1, t, sum_op, 0, MPI_COMM_WORLD);
            break;
        case C_BCAST_INIT:
        case C_ALLREDUCE_INIT:
            rc = MPI_Start(&req);
            break;
        case C_ALLTOALLW_BOTTOM:
        case C_NEIGHBOR_ALLTOALLW_BOTTOM:
            rc = w_call(t, C_NEIGHBOR_ALLTOALLW_BOTTOM == c);
            break;
        default: {
            /* a pointer to the lowest block and the type relative to it, into device memory;
             * or MPI_BOTTOM and the absolute type, into host memory (then only the send
             * side's blocks can make the call a device call: the entry must look at them) */
            MPI_Datatype rel = (C_ALLGATHER == c) ? layout_type(s, l, l->lowest)
                                                  : MPI_DATATYPE_NULL;
            size_t n = (size_t) total * (size_t) nranks;
            gathered = mt_kind_alloc(gather_kind, n * sizeof(double));
            got = malloc(n * sizeof(double));
            /* every rank's order of its blocks, to read what it sent (host memory) */
            orders = malloc(sizeof(int) * NB * (size_t) nranks);
            if (!mt_agree(NULL != gathered && NULL != got && NULL != orders)) {
                mt_diag_add(diag, "no memory for the gathered blocks; ");
                ok = 0;
            } else {
                MPI_Allgather(l->order, NB, MPI_INT, orders, NB, MPI_INT, MPI_COMM_WORLD);
                if (C_ALLGATHER == c) {
                    rc = MPI_Allgather(l->lowest, 1, rel, gathered, total, MPI_DOUBLE,
                                       MPI_COMM_WORLD);
                } else if (C_ALLGATHER_BOTTOM == c) {
                    rc = MPI_Allgather(MPI_BOTTOM, 1, t, gathered, total, MPI_DOUBLE,
                                       MPI_COMM_WORLD);
                } else {
                    rc = MPI_Iallgather(MPI_BOTTOM, 1, t, gathered, total, MPI_DOUBLE,
                                        MPI_COMM_WORLD, &req);
                }
            }
            if (MPI_DATATYPE_NULL != rel) {
                MPI_Type_free(&rel);
            }
            break;
        }
        }
        if (MPI_SUCCESS == rc && MPI_REQUEST_NULL != req) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "start %d: %s; ", k, mt_mpi_error(rc));
            ok = 0;
        } else if (ok && (C_ALLGATHER == c || C_ALLGATHER_BOTTOM == c
                          || C_IALLGATHER_BOTTOM == c)) {
            /* rank r's blocks in the order of its type, one after the other */
            ok = (DEV_OK == dev_memcpy(got, gathered, sizeof(double) * (size_t) total
                                                          * (size_t) nranks));
            for (int r = 0, at = 0; ok && r < nranks; ++r) {
                for (int b = 0; ok && b < NB; ++b) {
                    int blk = orders[r * NB + b];
                    for (int i = 0; ok && i < blk_len[blk]; ++i, ++at) {
                        double want = value(r, blk, blk_off[blk] + i, 0);
                        if (got[at] != want) {
                            mt_diag_add(diag, "gathered [%d] (rank %d, block %d) = %g, want "
                                        "%g; ", at, r, blk, got[at], want);
                            ok = 0;
                        }
                    }
                }
            }
            ok = ok && layout_check(l, k, NULL, NULL, true, diag);
        } else if (ok) {
            switch (c) {
            case C_BCAST:
            case C_IBCAST:
            case C_BCAST_INIT:
                ok = layout_check(l, k, want_root, NULL, true, diag);
                break;
            case C_ALLREDUCE_INPLACE:
                ok = layout_check(l, k, want_sum, NULL, true, diag);
                break;
            case C_REDUCE:
                /* the receive half means something at the root only */
                ok = 0 != mt_rank || layout_check(l, k, NULL, want_sum, true, diag);
                break;
            case C_ALLTOALLW_BOTTOM:
            case C_NEIGHBOR_ALLTOALLW_BOTTOM:
                ok = layout_check(l, k, NULL, want_left, true, diag);
                break;
            default:
                ok = layout_check(l, k, NULL, want_sum, true, diag);
                break;
            }
        }
        mt_kind_free(gather_kind, gathered);
        free(got);
        free(orders);
        if (!mt_agree(ok)) {
            break;
        }
    }
    if (MPI_REQUEST_NULL != req) {
        MPI_Request_free(&req);
    }
    return ok;
}

/* A layout of many elements whose span has fewer pages, its first byte host memory, device
 * memory further up: coll/gpu finds its kind page by page rather than run by run (the
 * scenarios' layouts have few blocks far apart: run by run).  A host block of HOSTN doubles
 * below a device allocation whose every other double is a block; host code must never touch
 * the device blocks. */
static void pages_case(void)
{
    enum { N = 32, HOSTN = 1 << 17 };
    const char *what = "a large host block below device memory (the kind by pages)";
    char diag[MT_DIAG_LEN] = "";
    double *d = mt_kind_alloc(MT_KIND_DEVICE, FIELD * sizeof(double)), *h = NULL, *img;
    int lens[1 + N], ok = 1, root = nranks - 1, fit;
    MPI_Aint disps[1 + N];
    MPI_Datatype t;
    size_t pages = 0;

    mt_set_case(what);
    img = malloc(HOSTN * sizeof(double));
    if (NULL != d) {
        h = map_near((uintptr_t) d, (uintptr_t) (d + FIELD), true, HOSTN * sizeof(double));
    }
    if (NULL != h) {
        pages = ((uintptr_t) (d + 2 * N) - (uintptr_t) h + 4095) / 4096;
    }
    /* the pages of the span must be fewer than the layout's elements */
    fit = NULL != h && pages < HOSTN + N;
    if (!mt_agree(NULL != d && NULL != img)) {
        mt_check(0, "no device or host memory", "%s: set up", what);
        goto out;
    }
    if (!mt_agree(fit)) {
        tap_skip("no room for host memory within 1 GiB below device memory here", "%s", what);
        goto out;
    }
    for (int i = 0; i < HOSTN; ++i) {
        h[i] = mt_rank == root ? value(root, 0, i % 50, 0) : POISON;
    }
    for (int i = 0; i < FIELD; ++i) {
        img[i] = (0 == i % 2 && i < 2 * N) ? (mt_rank == root ? value(root, 1, i, 0) : POISON)
                                            : guard(1, i);
    }
    ok = mt_agree(DEV_OK == dev_memcpy(d, img, FIELD * sizeof(double)));
    MPI_Get_address(h, &disps[0]);
    lens[0] = HOSTN;
    for (int i = 0; i < N; ++i) {
        MPI_Get_address(d + 2 * i, &disps[1 + i]);
        lens[1 + i] = 1;
    }
    MPI_Type_create_hindexed(1 + N, lens, disps, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    if (ok) {
        int rc = MPI_Bcast(MPI_BOTTOM, 1, t, root, MPI_COMM_WORLD);
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "%s; ", mt_mpi_error(rc));
            ok = 0;
        }
    }
    MPI_Type_free(&t);
    for (int i = 0; ok && i < HOSTN; ++i) {
        if (h[i] != value(root, 0, i % 50, 0)) {
            mt_diag_add(diag, "host element %d: %g, want %g; ", i, h[i],
                        value(root, 0, i % 50, 0));
            ok = 0;
        }
    }
    if (ok && DEV_OK != dev_memcpy(img, d, FIELD * sizeof(double))) {
        mt_diag_add(diag, "cannot read the device field back; ");
        ok = 0;
    }
    for (int i = 0; ok && i < FIELD; ++i) {
        double want = (0 == i % 2 && i < 2 * N) ? value(root, 1, i, 0) : guard(1, i);
        if (img[i] != want) {
            mt_diag_add(diag, "device element %d: %g, want %g; ", i, img[i], want);
            ok = 0;
        }
    }
    mt_check(ok, diag, "%s, a span of %zu pages on rank 0: MPI_Bcast right", what, pages);
out:
    if (NULL != h) {
        munmap(h, HOSTN * sizeof(double));
    }
    free(img);
    mt_kind_free(MT_KIND_DEVICE, d);
}

/* A rank whose last block runs past the end of its device allocation: it must return an
 * error, and no rank may hang. */
static void overrun_case(void)
{
    char diag[MT_DIAG_LEN] = "";
    int rc = MPI_SUCCESS, ok, lens[2] = {4, 8};
    double *a = NULL, *b = NULL, img[FIELD];
    MPI_Aint disps[2];
    MPI_Datatype t;
    bool emulated = (DEV_BACKEND_EMULATED == dev_backend());

    mt_set_case("a block past the end of its device allocation on rank 1");
    a = mt_kind_alloc(MT_KIND_DEVICE, FIELD * sizeof(double));
    b = mt_kind_alloc(MT_KIND_DEVICE, FIELD * sizeof(double));
    for (int i = 0; i < FIELD; ++i) {
        img[i] = (double) (i + 1);
    }
    ok = mt_agree(NULL != a && NULL != b && DEV_OK == dev_memcpy(a, img, sizeof(img))
                  && DEV_OK == dev_memcpy(b, img, sizeof(img)));
    if (!ok) {
        mt_check(0, "no device memory", "a block past the end of its allocation: set up");
        return;
    }
    MPI_Get_address(a + 2, &disps[0]);
    /* rank 1: 8 doubles from 4 before the end of b; the others: inside */
    MPI_Get_address(b + (1 == mt_rank ? FIELD - 4 : 8), &disps[1]);
    MPI_Type_create_hindexed(2, lens, disps, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    rc = MPI_Bcast(MPI_BOTTOM, 1, t, 0, MPI_COMM_WORLD);
    MPI_Type_free(&t);
    if (1 == mt_rank && MPI_SUCCESS == rc && emulated) {
        mt_diag_add(diag, "MPI_Bcast returned success; ");
        ok = 0;
    }
    mt_kind_free(MT_KIND_DEVICE, a);
    mt_kind_free(MT_KIND_DEVICE, b);
    mt_check(ok, diag, "a block past the end of its device allocation on rank 1: MPI_Bcast "
             "returns %s there, no rank hangs",
             emulated ? "an error" : "(an error where the copy fails)");
}

int main(int argc, char **argv)
{
    char why[256];

    mt_init(&argc, &argv);
    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "--rank0-host")) {
            rank0_host = 1;
        } else if (0 == strcmp(argv[i], "--no-overrun")) {
            /* for compute-sanitizer: the overrun case's failing copy is an API error it reports */
            no_overrun = 1;
        }
    }
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    nranks = mt_size;
    MPI_Op_create(sum_blocks, 1, &sum_op);
    tap_diag("rank 0 %s", rank0_host ? "keeps its fields in host memory" : "as the others");
    /* first, while the address space below the newest mappings is still free */
    if (!rank0_host) {
        pages_case();
    }
    for (int si = 0; si < NSCEN; ++si) {
        const scenario_t *s = &scenarios[si];
        layout_t l;
        int made, all_made;
        char name[320];
        MPI_Datatype t;
        size_t span = 0;

        snprintf(name, sizeof(name), "%s: set up", s->name);
        mt_set_case(name);
        why[0] = '\0';
        made = layout_make(s, &l, why, sizeof(why));
        /* -1: failed; 1: this machine places memory so that the scenario cannot be made */
        MPI_Allreduce(&made, &all_made, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        {
            int neg = (0 > made) ? 1 : 0, any_neg = 0;
            MPI_Allreduce(&neg, &any_neg, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (any_neg) {
                mt_check(0 <= made, why, "%s: set up", s->name);
                layout_free(&l);
                continue;
            }
        }
        {
            int pos = (0 < made) ? 1 : 0, any_pos = 0;
            MPI_Allreduce(&pos, &any_pos, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (any_pos) {
                tap_skip(0 < made ? why : "another rank could not place its fields",
                         "%s: every call", s->name);
                layout_free(&l);
                continue;
            }
        }
        MPI_Allreduce(&l.span, &span, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        if (span > MAX_SPAN) {
            tap_skip("the blocks lie more than 1 GiB apart here (the host collective's "
                     "temporaries cover the span)", "%s: every call", s->name);
            layout_free(&l);
            continue;
        }
        tap_diag("%s: rank %d's span %zu B, lowest block %d (%s)", s->name, mt_rank, l.span,
                 l.lowest_blk, l.dev[l.lowest_blk] ? "device" : "host");
        t = layout_type(s, &l, NULL);
        for (int c = 0; c < C_COUNT; ++c) {
            char diag[MT_DIAG_LEN] = "";
            int ok;

            snprintf(name, sizeof(name), "%s: %s", s->name, coll_names[c]);
            mt_set_case(name);
            if (C_ALLGATHER == c) {
                /* the entry of MPI_Allgather goes by its pointer's kind: a device lowest
                 * block on every rank (or all host memory) */
                int fit = l.dev[l.lowest_blk] || (rank0_host && 0 == mt_rank);
                if (!mt_agree(fit)) {
                    tap_skip("the lowest block is host memory: MPI_Allgather's entry goes by "
                             "the kind of its pointer", "%s", name);
                    continue;
                }
            }
            ok = one_call(s, &l, t, (coll_t) c, diag);
            mt_check(ok, diag, "%s: right, gaps and neighbours untouched", name);
        }
        MPI_Type_free(&t);
        layout_free(&l);
    }
    if (!no_overrun) {
        overrun_case();
    }
    MPI_Op_free(&sum_op);
    return mt_finish();
}
