/*
 * test_signature.c - ranks that pass different datatypes of one type signature to one call.
 *
 * MPI requires only the type signatures of a call to match: each rank may describe its part
 * with its own layout.  coll/gpu must choose the path of a call from what every rank shares
 * (never a rank's layout or type handle), and each rank must then bring its own layout to that
 * path.  Each rank here draws its datatype from its own random seed: the same basic type (int)
 * and total count, different layouts: predefined, dup, contiguous, vector, hvector, indexed,
 * hindexed, indexed_block, struct, subarray, resized (negative lower bound, extent larger than
 * the size).  Sections:
 *
 *   bcast       MPI_Bcast, every root
 *   moves       MPI_Gather, MPI_Scatter, MPI_Allgather, MPI_Alltoall (send and receive
 *               layouts drawn independently)
 *   reduce      MPI_Allreduce (in place too) and MPI_Reduce, sum, with MPI_INT, a dup of it,
 *               and dense derived types of one int (contiguous, struct, indexed_block)
 *   truncate    an erroneous MPI_Bcast (the root's count differs from the others'): every rank
 *               must return (the receivers MPI_ERR_TRUNCATE, the root an error) and none may
 *               hang; a correct MPI_Bcast afterwards must still work
 *   dupint      MPI_Allreduce and MPI_Bcast with MPI_INT on even ranks and a dup of MPI_INT
 *               on odd ranks (the path of each call is in the coll_gpu_verbose log that
 *               signature.sh compares across ranks)
 *
 * Counts 0, 1, 17, 50, 100, 512, 65530 (ints in total per rank and call); communicators world,
 * dup, split (odd/even) and reversed (rank order turned around).  Buffers are device memory
 * (the backend coll/gpu uses; emulated in CI, where host code touching it faults), filled with
 * random data; receive buffers are poisoned, with guard bytes around them; the expected image of
 * each buffer (gaps and guards included) is computed on the host with MPI_Unpack from the
 * streams every rank regenerates from (seed, case, rank).
 *
 * Usage: test_signature [--sections=bcast,moves,reduce,truncate,dupint] [--host] [--any-device]
 *   --any-device: each buffer is, at each rank's own draw, plain device memory, stream-ordered
 *   pool memory (not exportable through the legacy CUDA IPC) or managed memory; all of them
 *   take the path the call's signature chose, the rank adapting through a device temporary
 * Environment: COLL_GPU_TEST_SEED, COLL_GPU_TEST_CASE_TIMEOUT (per case: a hang fails).
 */
#include "mpitest.h"

#define GUARD 64
#define POISON 0xA5

static const int counts[] = {0, 1, 17, 50, 100, 512, 65530};
#define NCOUNTS ((int) (sizeof(counts) / sizeof(counts[0])))

static uint64_t seed = 20261130;
/* device buffers; host with --host (to tell a fault of the test from one of coll/gpu) */
static mt_mem_t mem_kind = MT_MEM_DEVICE;
/* --any-device: each device buffer is, at this rank's own draw, plain device memory,
 * stream-ordered pool memory (not exportable through the legacy IPC) or managed memory */
static int any_device = 0;
static uint64_t alloc_draws = 0;
static const char *const alloc_names[3] = {"device", "pool", "managed"};
static uint64_t case_no = 0;

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The n ints a rank contributes to a case (any rank can regenerate any rank's). */
static void stream(uint64_t c, int who, int *out, size_t n)
{
    uint64_t s = mix64(seed ^ mix64(c * 1000003u + (uint64_t) who + 1));
    for (size_t i = 0; i < n; ++i) {
        s = mix64(s);
        out[i] = (int) (s % 2000001) - 1000000; /* sums of a few stay far from overflow */
    }
}

/* ---- layouts --------------------------------------------------------------------------------- */

enum {
    L_PREDEF, L_DUP, L_CONTIG, L_VECTOR, L_HVECTOR, L_INDEXED, L_HINDEXED, L_BLOCK, L_STRUCT,
    L_SUBARRAY, L_RESIZED, L_COUNT
};
static const char *const layout_names[L_COUNT] = {
    "int", "dup", "contiguous", "vector", "hvector", "indexed", "hindexed", "indexed_block",
    "struct", "subarray", "resized",
};

typedef struct {
    MPI_Datatype type;
    int kind;
    int n; /* ints per element */
    char name[48];
} layout_t;

/* A layout of n ints per element; n must divide the total count. */
static void layout_make(int kind, int n, layout_t *l)
{
    MPI_Datatype t = MPI_DATATYPE_NULL;
    int bl[32], di[32];
    MPI_Aint ad[32];
    MPI_Datatype ty[32];

    l->kind = kind;
    l->n = n;
    for (int i = 0; i < n; ++i) {
        bl[i] = 1;
        di[i] = 3 * i + (i % 2);                 /* irregular gaps, increasing */
        ad[i] = (MPI_Aint) (12 * i + (i % 2) * 4);
        ty[i] = MPI_INT;
    }
    switch (kind) {
    case L_PREDEF:
        l->type = MPI_INT;
        snprintf(l->name, sizeof(l->name), "int");
        return;
    case L_DUP:
        MPI_Type_dup(MPI_INT, &t);
        break;
    case L_CONTIG:
        MPI_Type_contiguous(n, MPI_INT, &t);
        break;
    case L_VECTOR:
        MPI_Type_vector(n, 1, 2, MPI_INT, &t);
        break;
    case L_HVECTOR:
        MPI_Type_create_hvector(n, 1, 12, MPI_INT, &t);
        break;
    case L_INDEXED:
        MPI_Type_indexed(n, bl, di, MPI_INT, &t);
        break;
    case L_HINDEXED:
        MPI_Type_create_hindexed(n, bl, ad, MPI_INT, &t);
        break;
    case L_BLOCK:
        MPI_Type_create_indexed_block(n, 1, di, MPI_INT, &t);
        break;
    case L_STRUCT:
        for (int i = 0; i < n; ++i) {
            ad[i] = (MPI_Aint) (8 * i + 4);
        }
        MPI_Type_create_struct(n, bl, ad, ty, &t);
        break;
    case L_SUBARRAY: {
        int sizes[2] = {2, n + 2}, sub[2] = {1, n}, starts[2] = {1, 1};
        MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_INT, &t);
        break;
    }
    default: { /* L_RESIZED: n ints at -12 bytes, lower bound -16, 16 bytes of gap per element */
        MPI_Datatype inner;
        MPI_Aint at = -12;
        int len = n;
        MPI_Datatype one = MPI_INT;
        MPI_Type_create_struct(1, &len, &at, &one, &inner);
        MPI_Type_create_resized(inner, -16, (MPI_Aint) n * 4 + 16, &t);
        MPI_Type_free(&inner);
        break;
    }
    }
    MPI_Type_commit(&t);
    l->type = t;
    snprintf(l->name, sizeof(l->name), "%s(%d)", layout_names[kind], n);
}

static void layout_free(layout_t *l)
{
    if (L_PREDEF != l->kind && MPI_DATATYPE_NULL != l->type) {
        MPI_Type_free(&l->type);
    }
}

/* Draw a layout for total ints from this rank's own generator: n is a divisor of total. */
static void layout_draw(uint64_t *s, int total, layout_t *l)
{
    static const int ns[] = {1, 2, 5, 17, 25};
    int kind, n = 1, tries = 0;

    *s = mix64(*s);
    kind = (int) (*s % L_COUNT);
    if (L_PREDEF != kind && L_DUP != kind) {
        do {
            *s = mix64(*s);
            n = ns[*s % (sizeof(ns) / sizeof(ns[0]))];
        } while (0 != total && 0 != total % n && ++tries < 16);
        if (0 != total && 0 != total % n) {
            n = 1;
        }
    }
    layout_make(kind, n, l);
}

/* This rank's generator for a case: its own seed (world rank), the case, a role. */
static uint64_t rank_seed(int role)
{
    int wr;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    return mix64(seed * 7919u + (uint64_t) wr * 104729u + case_no * 31u + (uint64_t) role);
}

/* ---- buffers --------------------------------------------------------------------------------- */

/* count elements of a layout: a device buffer with guards, and its host image.  The region
 * spans the bytes the elements touch and the user pointer itself (as an array that a subarray
 * type picks from is allocated from its start), with GUARD bytes on each side; or, when
 * buf_tight is set, only the bytes the elements touch: with a positive lower bound the user
 * pointer then lies before the allocation (legal MPI: only the elements must be memory). */
static int buf_tight = 0;
typedef struct {
    size_t len;      /* bytes of the region: from lo to the end of the last element */
    ptrdiff_t lo;    /* start of the region relative to the user pointer (<= 0) */
    char *dev;       /* allocation: len + 2 GUARD */
    unsigned char *img;
    unsigned char *want;
    int alloc;       /* with --any-device: index in alloc_names */
} buf_t;

static int buf_make(buf_t *b, const layout_t *l, int count)
{
    MPI_Aint lb, ext, tlb, text;
    memset(b, 0, sizeof(*b));
    MPI_Type_get_extent(l->type, &lb, &ext);
    MPI_Type_get_true_extent(l->type, &tlb, &text);
    if (count > 0) {
        ptrdiff_t hi = (ptrdiff_t) ((MPI_Aint) (count - 1) * ext + tlb + text);
        b->lo = (tlb < 0 || buf_tight) ? (ptrdiff_t) tlb : 0;
        b->len = (size_t) ((hi > 0 ? hi : 0) - b->lo);
    }
    if (MT_MEM_DEVICE == mem_kind && any_device) {
        int wr, rc;
        void *p = NULL;
        MPI_Comm_rank(MPI_COMM_WORLD, &wr);
        b->alloc = (int) (mix64(seed + (uint64_t) wr * 7777u + ++alloc_draws) % 3);
        rc = (0 == b->alloc)   ? dev_mem_alloc(&p, b->len + 2 * GUARD)
             : (1 == b->alloc) ? dev_mem_alloc_pool(&p, b->len + 2 * GUARD)
                               : dev_mem_alloc_managed(&p, b->len + 2 * GUARD);
        b->dev = (DEV_OK == rc) ? p : NULL;
    } else {
        b->dev = mt_mem_alloc(mem_kind, b->len + 2 * GUARD);
    }
    b->img = malloc(b->len + 2 * GUARD);
    b->want = malloc(b->len + 2 * GUARD);
    if (NULL == b->dev || NULL == b->img || NULL == b->want) {
        return 0;
    }
    memset(b->img, POISON, b->len + 2 * GUARD);
    memset(b->want, POISON, b->len + 2 * GUARD);
    return 1;
}

static void *buf_user(const buf_t *b)
{
    return b->dev + GUARD - b->lo;
}

/* Lay ints out in a host image as count elements of the layout (gaps untouched). */
static void image_fill(unsigned char *img, const buf_t *b, const layout_t *l, int count,
                       const int *ints, size_t nints)
{
    int pos = 0;
    if (0 == count) {
        return;
    }
    MPI_Unpack(ints, (int) (nints * sizeof(int)), &pos, img + GUARD - b->lo, count, l->type,
               MPI_COMM_SELF);
}

static int buf_put(buf_t *b)
{
    return 0 == mt_mem_put(mem_kind, b->dev, b->img, b->len + 2 * GUARD);
}

/* Read the device buffer back and compare it with want, byte for byte. */
static int buf_check(buf_t *b, const char *what, char *diag)
{
    size_t total = b->len + 2 * GUARD;
    if (0 != mt_mem_get(MT_MEM_DEVICE, b->img, b->dev, total)) {
        mt_diag_add(diag, "%s: cannot read the device buffer back; ", what);
        return 0;
    }
    for (size_t i = 0; i < total; ++i) {
        if (b->img[i] != b->want[i]) {
            mt_diag_add(diag, "%s (%s memory): byte %zd (of %zu, guard %d) is 0x%02x, want "
                        "0x%02x; ", what, MT_MEM_HOST == mem_kind ? "host" : alloc_names[b->alloc],
                        (ptrdiff_t) i - GUARD, b->len, GUARD, b->img[i], b->want[i]);
            return 0;
        }
    }
    return 1;
}

static void buf_free(buf_t *b)
{
    mt_mem_free(mem_kind, b->dev);
    free(b->img);
    free(b->want);
}

static int call_ok(int rc, const char *what, char *diag)
{
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s: %s; ", what, mt_mpi_error(rc));
        return 0;
    }
    return 1;
}

/* ---- communicators --------------------------------------------------------------------------- */

#define NCOMMS 4
static MPI_Comm comms[NCOMMS];
static const char *const comm_names[NCOMMS] = {"world", "dup", "split", "reversed"};

static void comms_make(void)
{
    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &comms[2]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &comms[3]);
    for (int i = 1; i < NCOMMS; ++i) {
        MPI_Comm_set_errhandler(comms[i], MPI_ERRORS_RETURN);
    }
}

static void comms_free(void)
{
    for (int i = 1; i < NCOMMS; ++i) {
        MPI_Comm_free(&comms[i]);
    }
}

/* ---- bcast ----------------------------------------------------------------------------------- */

static void case_bcast(int ci, int total, int root)
{
    MPI_Comm comm = comms[ci];
    int crank, ok = 1, rc;
    char diag[MT_DIAG_LEN] = "", name[160];
    int *ints = malloc(sizeof(int) * (size_t) (total ? total : 1));
    uint64_t s = rank_seed(0);
    layout_t l;
    buf_t b;

    MPI_Comm_rank(comm, &crank);
    layout_draw(&s, total, &l);
    snprintf(name, sizeof(name), "bcast %s %d ints root %d", comm_names[ci], total, root);
    mt_set_case(name);
    s = mix64(s);
    buf_tight = (int) (s & 1); /* this rank's own draw too */
    ok = buf_make(&b, &l, total / l.n) && NULL != ints;
    buf_tight = 0;
    if (ok) {
        stream(case_no, root, ints, (size_t) total);
        image_fill(b.want, &b, &l, total / l.n, ints, (size_t) total);
        if (crank == root) {
            memcpy(b.img, b.want, b.len + 2 * GUARD);
        }
        ok = buf_put(&b);
    }
    rc = MPI_Bcast(buf_user(&b), total / l.n, l.type, root, comm);
    ok = call_ok(rc, "MPI_Bcast", diag) && ok;
    ok = ok && buf_check(&b, l.name, diag);
    if (!ok) {
        mt_diag_add(diag, "(layout %s%s)", l.name, b.lo > 0 ? ", pointer before the buffer" : "");
    }
    mt_check(ok, diag, "%s (rank %d: %s)", name, mt_rank, l.name);
    buf_free(&b);
    layout_free(&l);
    free(ints);
    ++case_no;
}

static void section_bcast(void)
{
    for (int ci = 0; ci < NCOMMS; ++ci) {
        int csize;
        MPI_Comm_size(comms[ci], &csize);
        for (int k = 0; k < NCOUNTS; ++k) {
            /* as many cases on every rank (the verdicts are collective over the world): a
             * smaller communicator of the split runs some roots twice */
            for (int r = 0; r < mt_size; ++r) {
                case_bcast(ci, counts[k], r % csize);
            }
        }
    }
}

/* ---- gather, scatter, allgather, alltoall ---------------------------------------------------- */

enum { M_GATHER, M_SCATTER, M_ALLGATHER, M_ALLTOALL, M_COUNT };
static const char *const move_names[M_COUNT] = {"gather", "scatter", "allgather", "alltoall"};

/* One data-movement call: this rank sends with layout sl and receives with rl (each drawn from
 * its own generator); total ints travel between each pair of ranks that exchange. */
static void case_move(int what, int ci, int total, int root)
{
    MPI_Comm comm = comms[ci];
    int crank, csize, ok = 1, rc = MPI_SUCCESS;
    char diag[MT_DIAG_LEN] = "", name[160];
    uint64_t s = rank_seed(1);
    layout_t sl, rl;
    buf_t sb, rb;
    int *ints;
    int sn, rn;  /* elements per peer block */
    int sblocks, rblocks;
    bool sig, rsig;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    layout_draw(&s, total, &sl);
    layout_draw(&s, total, &rl);
    sn = total / sl.n;
    rn = total / rl.n;
    /* which buffers mean something on this rank, and how many blocks they hold */
    sig = (M_SCATTER != what) || crank == root;
    rsig = (M_GATHER != what) || crank == root;
    sblocks = (M_SCATTER == what || M_ALLTOALL == what) ? csize : 1;
    rblocks = (M_GATHER == what || M_ALLGATHER == what || M_ALLTOALL == what) ? csize : 1;
    snprintf(name, sizeof(name), "%s %s %d ints root %d", move_names[what], comm_names[ci],
             total, root);
    mt_set_case(name);
    ints = malloc(sizeof(int) * (size_t) (total ? total : 1) * (size_t) csize);
    ok = NULL != ints && buf_make(&sb, &sl, sig ? sn * sblocks : 0)
         && buf_make(&rb, &rl, rsig ? rn * rblocks : 0);
    if (ok && sig) {
        /* this rank's stream: sblocks x total ints, block j for receiver j */
        stream(case_no, crank, ints, (size_t) total * (size_t) sblocks);
        image_fill(sb.img, &sb, &sl, sn * sblocks, ints, (size_t) total * (size_t) sblocks);
        memcpy(sb.want, sb.img, sb.len + 2 * GUARD);
    }
    if (ok && rsig) {
        /* what arrives: block j from sender j (gather, allgather, alltoall) or from the root */
        int *tmp = malloc(sizeof(int) * (size_t) (total ? total : 1) * (size_t) csize);
        ok = NULL != tmp;
        for (int j = 0; ok && j < rblocks; ++j) {
            int from = (M_SCATTER == what) ? root : j;
            int nblk = (M_SCATTER == what || M_ALLTOALL == what) ? csize : 1;
            int blk = (M_SCATTER == what || M_ALLTOALL == what) ? crank : 0;
            stream(case_no, from, tmp, (size_t) total * (size_t) nblk);
            memcpy(ints + (size_t) j * (size_t) total, tmp + (size_t) blk * (size_t) total,
                   sizeof(int) * (size_t) total);
        }
        free(tmp);
        if (ok) {
            image_fill(rb.want, &rb, &rl, rn * rblocks, ints, (size_t) total * (size_t) rblocks);
        }
    }
    ok = ok && buf_put(&sb) && buf_put(&rb);
    switch (what) {
    case M_GATHER:
        rc = MPI_Gather(buf_user(&sb), sn, sl.type, rsig ? buf_user(&rb) : NULL, rn, rl.type,
                        root, comm);
        break;
    case M_SCATTER:
        rc = MPI_Scatter(sig ? buf_user(&sb) : NULL, sn, sl.type, buf_user(&rb), rn, rl.type,
                         root, comm);
        break;
    case M_ALLGATHER:
        rc = MPI_Allgather(buf_user(&sb), sn, sl.type, buf_user(&rb), rn, rl.type, comm);
        break;
    default:
        rc = MPI_Alltoall(buf_user(&sb), sn, sl.type, buf_user(&rb), rn, rl.type, comm);
        break;
    }
    ok = call_ok(rc, move_names[what], diag) && ok;
    ok = ok && buf_check(&sb, "send buffer", diag) && buf_check(&rb, "receive buffer", diag);
    mt_check(ok, diag, "%s (rank %d: send %s, receive %s)", name, mt_rank, sl.name, rl.name);
    buf_free(&sb);
    buf_free(&rb);
    layout_free(&sl);
    layout_free(&rl);
    free(ints);
    ++case_no;
}

static void section_moves(void)
{
    for (int what = 0; what < M_COUNT; ++what) {
        for (int ci = 0; ci < NCOMMS; ++ci) {
            int csize;
            MPI_Comm_size(comms[ci], &csize);
            for (int k = 0; k < NCOUNTS; ++k) {
                case_move(what, ci, counts[k], (k + what) % csize);
            }
        }
    }
}

/* ---- reductions ------------------------------------------------------------------------------ */

/* A dense datatype of one int, drawn from this rank's generator: the reductions' signature is
 * count ints on every rank, but the handle differs. */
static void reduce_type_draw(uint64_t *s, layout_t *l)
{
    static const char *const names[] = {"int", "dup", "contiguous(1)", "struct(1)",
                                        "indexed_block(1)"};
    int which;
    *s = mix64(*s);
    which = (int) (*s % 5);
    l->kind = (0 == which) ? L_PREDEF : L_DUP;
    l->n = 1;
    snprintf(l->name, sizeof(l->name), "%s", names[which]);
    if (0 == which) {
        l->type = MPI_INT;
        return;
    }
    if (1 == which) {
        MPI_Type_dup(MPI_INT, &l->type);
    } else if (2 == which) {
        MPI_Type_contiguous(1, MPI_INT, &l->type);
    } else if (3 == which) {
        int one = 1;
        MPI_Aint zero = 0;
        MPI_Datatype i = MPI_INT;
        MPI_Type_create_struct(1, &one, &zero, &i, &l->type);
    } else {
        int zero = 0;
        MPI_Type_create_indexed_block(1, 1, &zero, MPI_INT, &l->type);
    }
    MPI_Type_commit(&l->type);
}

/* mode 0: MPI_Allreduce, 1: MPI_Allreduce in place, 2: MPI_Reduce to root. */
static void case_reduce(int mode, int ci, int total, int root)
{
    static const char *const modes[] = {"allreduce", "allreduce in place", "reduce"};
    MPI_Comm comm = comms[ci];
    int crank, csize, ok = 1, rc;
    char diag[MT_DIAG_LEN] = "", name[160];
    uint64_t s = rank_seed(2);
    size_t n = (size_t) (total ? total : 1);
    int *mine = malloc(sizeof(int) * n), *sum = calloc(n, sizeof(int));
    int *tmp = malloc(sizeof(int) * n);
    bool rsig;
    layout_t l;
    buf_t sb, rb;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    rsig = (2 != mode) || crank == root;
    reduce_type_draw(&s, &l);
    snprintf(name, sizeof(name), "%s sum %s %d ints%s", modes[mode], comm_names[ci], total,
             2 == mode ? " to a root" : "");
    mt_set_case(name);
    ok = NULL != mine && NULL != sum && NULL != tmp && buf_make(&sb, &l, total)
         && buf_make(&rb, &l, total);
    if (ok) {
        stream(case_no, crank, mine, (size_t) total);
        for (int r = 0; r < csize; ++r) {
            stream(case_no, r, tmp, (size_t) total);
            for (int i = 0; i < total; ++i) {
                sum[i] = (int) ((unsigned) sum[i] + (unsigned) tmp[i]);
            }
        }
        image_fill(sb.img, &sb, &l, total, mine, (size_t) total);
        memcpy(sb.want, sb.img, sb.len + 2 * GUARD);
        if (1 == mode) {
            memcpy(rb.img, sb.img, rb.len + 2 * GUARD);
        }
        if (rsig) {
            image_fill(rb.want, &rb, &l, total, sum, (size_t) total);
        } else {
            memcpy(rb.want, rb.img, rb.len + 2 * GUARD);
        }
        ok = buf_put(&sb) && buf_put(&rb);
    }
    if (2 == mode) {
        rc = MPI_Reduce(buf_user(&sb), buf_user(&rb), total, l.type, MPI_SUM, root, comm);
    } else {
        rc = MPI_Allreduce(1 == mode ? MPI_IN_PLACE : buf_user(&sb), buf_user(&rb), total,
                           l.type, MPI_SUM, comm);
    }
    ok = call_ok(rc, modes[mode], diag) && ok;
    ok = ok && buf_check(&sb, "send buffer", diag) && buf_check(&rb, "receive buffer", diag);
    mt_check(ok, diag, "%s (rank %d: %s)", name, mt_rank, l.name);
    buf_free(&sb);
    buf_free(&rb);
    layout_free(&l);
    free(mine);
    free(sum);
    free(tmp);
    ++case_no;
}

static void section_reduce(void)
{
    for (int mode = 0; mode < 3; ++mode) {
        for (int ci = 0; ci < NCOMMS; ++ci) {
            int csize;
            MPI_Comm_size(comms[ci], &csize);
            for (int k = 0; k < NCOUNTS; ++k) {
                case_reduce(mode, ci, counts[k], k % csize);
            }
        }
    }
}

/* ---- erroneous bcast ------------------------------------------------------------------------- */

/* The root sends root_count ints, every other rank expects count: an erroneous program.  Every
 * rank must return, the receivers with MPI_ERR_TRUNCATE, the root with an error; then a correct
 * MPI_Bcast on the same communicator must still deliver. */
static void case_truncate(int root, int root_count, int count)
{
    int crank, ok = 1, rc, cls = MPI_SUCCESS, n;
    char diag[MT_DIAG_LEN] = "", name[160];
    MPI_Comm comm;
    layout_t l;
    buf_t b;

    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &crank);
    layout_make(L_PREDEF, 1, &l);
    n = (crank == root) ? root_count : count;
    snprintf(name, sizeof(name), "erroneous bcast: root %d sends %d ints, the others expect %d",
             root, root_count, count);
    mt_set_case(name);
    ok = buf_make(&b, &l, root_count > count ? root_count : count) && buf_put(&b);
    rc = MPI_Bcast(buf_user(&b), n, MPI_INT, root, comm);
    if (MPI_SUCCESS == rc) {
        mt_diag_add(diag, "MPI_Bcast returned MPI_SUCCESS; ");
        ok = 0;
    } else {
        MPI_Error_class(rc, &cls);
        if (crank != root && MPI_ERR_TRUNCATE != cls) {
            mt_diag_add(diag, "error class %d (%s), not MPI_ERR_TRUNCATE; ", cls,
                        mt_mpi_error(rc));
            ok = 0;
        }
    }
    mt_check(ok, diag, "%s: every rank returns an error (receivers MPI_ERR_TRUNCATE)", name);
    buf_free(&b);

    /* the communicator still works */
    diag[0] = '\0';
    snprintf(name, sizeof(name), "bcast of %d ints from root %d after the erroneous one", count,
             root);
    mt_set_case(name);
    ok = buf_make(&b, &l, count);
    if (ok) {
        int *ints = malloc(sizeof(int) * (size_t) count);
        ok = NULL != ints;
        if (ok) {
            stream(case_no, root, ints, (size_t) count);
            image_fill(b.want, &b, &l, count, ints, (size_t) count);
            if (crank == root) {
                memcpy(b.img, b.want, b.len + 2 * GUARD);
            }
        }
        free(ints);
        ok = ok && buf_put(&b);
    }
    rc = MPI_Bcast(buf_user(&b), count, MPI_INT, root, comm);
    ok = call_ok(rc, "MPI_Bcast", diag) && ok;
    ok = ok && buf_check(&b, "buffer", diag);
    mt_check(ok, diag, "%s", name);
    buf_free(&b);
    MPI_Comm_free(&comm);
    ++case_no;
}

static void section_truncate(void)
{
    for (int root = 0; root < mt_size; ++root) {
        case_truncate(root, 32768, 65536); /* receivers expect more than comes */
        case_truncate(root, 65536, 16384); /* receivers expect less than comes */
    }
}

/* ---- MPI_INT and a dup of it ----------------------------------------------------------------- */

static void section_dupint(void)
{
    static const int sizes[] = {1, 1000, 300000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
        int total = sizes[k], ok, rc;
        char diag[MT_DIAG_LEN] = "", name[160];
        layout_t l;
        buf_t sb, rb;
        int *mine = malloc(sizeof(int) * (size_t) total);
        int *sum = calloc((size_t) total, sizeof(int));
        int *tmp = malloc(sizeof(int) * (size_t) total);

        layout_make(0 == mt_rank % 2 ? L_PREDEF : L_DUP, 1, &l);
        snprintf(name, sizeof(name), "allreduce sum of %d ints: MPI_INT on even ranks, a dup of "
                 "it on odd ones", total);
        mt_set_case(name);
        ok = NULL != mine && NULL != sum && NULL != tmp && buf_make(&sb, &l, total)
             && buf_make(&rb, &l, total);
        if (ok) {
            stream(case_no, mt_rank, mine, (size_t) total);
            for (int r = 0; r < mt_size; ++r) {
                stream(case_no, r, tmp, (size_t) total);
                for (int i = 0; i < total; ++i) {
                    sum[i] = (int) ((unsigned) sum[i] + (unsigned) tmp[i]);
                }
            }
            image_fill(sb.img, &sb, &l, total, mine, (size_t) total);
            memcpy(sb.want, sb.img, sb.len + 2 * GUARD);
            image_fill(rb.want, &rb, &l, total, sum, (size_t) total);
            ok = buf_put(&sb) && buf_put(&rb);
        }
        rc = MPI_Allreduce(buf_user(&sb), buf_user(&rb), total, l.type, MPI_SUM, MPI_COMM_WORLD);
        ok = call_ok(rc, "MPI_Allreduce", diag) && ok;
        ok = ok && buf_check(&rb, "receive buffer", diag);
        mt_check(ok, diag, "%s", name);
        buf_free(&sb);

        /* the same for MPI_Bcast from the last rank, in the receive buffer */
        diag[0] = '\0';
        snprintf(name, sizeof(name), "bcast of %d ints: MPI_INT on even ranks, a dup of it on "
                 "odd ones", total);
        mt_set_case(name);
        stream(case_no, mt_size - 1, mine, (size_t) total);
        memset(rb.want, POISON, rb.len + 2 * GUARD);
        image_fill(rb.want, &rb, &l, total, mine, (size_t) total);
        memset(rb.img, POISON, rb.len + 2 * GUARD);
        if (mt_rank == mt_size - 1) {
            memcpy(rb.img, rb.want, rb.len + 2 * GUARD);
        }
        ok = buf_put(&rb);
        rc = MPI_Bcast(buf_user(&rb), total, l.type, mt_size - 1, MPI_COMM_WORLD);
        ok = call_ok(rc, "MPI_Bcast", diag) && ok;
        ok = ok && buf_check(&rb, "buffer", diag);
        mt_check(ok, diag, "%s", name);
        buf_free(&rb);
        layout_free(&l);
        free(mine);
        free(sum);
        free(tmp);
        ++case_no;
    }
}

int main(int argc, char **argv)
{
    const char *sections = "bcast,moves,reduce,truncate,dupint";
    char why[300];
    const char *s;

    mt_init(&argc, &argv);
    for (int i = 1; i < argc; ++i) {
        if (0 == strncmp(argv[i], "--sections=", 11)) {
            sections = argv[i] + 11;
        } else if (0 == strcmp(argv[i], "--host")) {
            mem_kind = MT_MEM_HOST;
        } else if (0 == strcmp(argv[i], "--any-device")) {
            any_device = 1;
        }
    }
    if (NULL != (s = getenv("COLL_GPU_TEST_SEED")) && s[0]) {
        seed = strtoull(s, NULL, 0);
    }
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    tap_diag("%d ranks, %s buffers, seed %llu, sections %s", mt_size,
             MT_MEM_HOST == mem_kind ? "host" : any_device ? "device, pool or managed" : "device",
             (unsigned long long) seed, sections);
    comms_make();
    if (NULL != strstr(sections, "bcast")) {
        section_bcast();
    }
    if (NULL != strstr(sections, "moves")) {
        section_moves();
    }
    if (NULL != strstr(sections, "reduce")) {
        section_reduce();
    }
    if (NULL != strstr(sections, "truncate")) {
        section_truncate();
    }
    if (NULL != strstr(sections, "dupint")) {
        section_dupint();
    }
    comms_free();
    return mt_finish();
}
