/*
 * test_coll.c - the MPI correctness matrix of coll/gpu.
 *
 * Every collective (bcast, reduce, allreduce, allgather(v), alltoall(v,w), gather(v),
 * scatter(v), reduce_scatter(_block), scan, exscan, barrier) is run over
 *   predefined types x every predefined op valid for them, derived and non-contiguous types
 *   (vector, struct resized to a positive and to a negative lower bound), user-defined ops
 *   (commutative and not), counts from 0 to ~8 MiB around the staging chunk boundaries,
 *   MPI_IN_PLACE wherever MPI allows it, several communicators (world, odd/even split,
 *   uneven split, dup, MPI_COMM_SELF) and host, device and mixed buffers across the ranks,
 * with a combinatorial subset chosen so that every axis is covered without running the full
 * product (see the sections at the end of this file).
 *
 * Each case: inputs are random data generated from (seed, case, rank), so that every rank can
 * regenerate any rank's input and compute the expected result with no communication; outputs are
 * poisoned (0xA5) before the call; after the call the whole allocation, guard bytes and type
 * gaps included, is read back and compared with the expected image.  One TAP line per case,
 * printed by rank 0 after the verdict is reduced over MPI_COMM_WORLD; a failure prints, for each
 * failing rank, the first wrong byte with the element, expected and got.
 *
 * Device buffers come from libcoll_gpu_dev with the backend coll/gpu uses
 * (OMPI_MCA_coll_gpu_device: emulated in CI, cuda on a GPU machine).  With the emulated backend
 * device memory faults when host code touches it, so a passing device case proves the data went
 * through coll/gpu's device path or its staging.  When the backend cannot be opened:
 * mt_device_open's rule (tap.h's skip where cuda is not required, else an error).
 *
 * Usage: test_coll [--quick] [--sections=selfcheck,types,user,derived,modes,sizes] [--list]
 *                  [--kinds=auto|uniform|mixed|all]
 *   (--sections=nonblocking, not run by default but by coll_nonblocking.sh: the MPI_I... twins
 *   on host and device buffers, MPI_Test polling, several requests in flight;
 *   --sections=neighbor, run by coll_neighbor.sh: MPI_Neighbor_... and MPI_Ineighbor_... on
 *   cartesian and distributed-graph topologies)
 * Environment: COLL_GPU_TEST_SEED (default 20261129), COLL_GPU_TEST_FILTER (globs, or
 * substrings, separated by '|', matched against the case name; cases that match none are not
 * run),
 * COLL_GPU_TEST_EXCLUDE (the same, for cases not to run), COLL_GPU_TEST_CASE_TIMEOUT (seconds
 * per case, default 120).
 *
 * Buffer kinds that differ across the ranks of one call (modes mixed, root-dev, root-host) are
 * legal MPI, but coll/gpu's fast paths assume uniform kinds unless coll_gpu_uniform_buffers is
 * false (README, "Mixed host and device buffers").  So by default (--kinds=auto) those cases
 * run only when OMPI_MCA_coll_gpu_uniform_buffers is false; --kinds=mixed runs only them,
 * --kinds=uniform only the others, --kinds=all every case whatever the parameter says.
 */
#include <complex.h>
#include <float.h>
#include <fnmatch.h>
#include <limits.h>
#include <strings.h>
#include <stddef.h>

#include "mpitest.h"

#define POISON 0xA5
#define GUARD 64

/* ---- scalar kinds: the C types the values live in ---------------------------------------- */

typedef struct {
    float v;
    int k;
} float_int_t;
typedef struct {
    double v;
    int k;
} double_int_t;
typedef struct {
    long v;
    int k;
} long_int_t;
typedef struct {
    int v;
    int k;
} int_int_t;
typedef struct {
    short v;
    int k;
} short_int_t;
/* The non-commutative user op's element: the affine map t -> a*t + b (mod 2^32). */
typedef struct {
    uint32_t a;
    uint32_t b;
} aff_t;

enum {
    K_I8, K_U8, K_I16, K_U16, K_I32, K_U32, K_I64, K_U64,
    K_U63, /* uint64 below 2^63: for a type whose unsignedness Open MPI gets wrong */
    K_BOOL,
    K_F32, K_F64, K_LD, K_CF32, K_CF64,
    K_FLOAT_INT, K_DOUBLE_INT, K_LONG_INT, K_2INT, K_SHORT_INT,
    K_AFF,
    K_COUNT
};

static const struct {
    const char *name;
    size_t size;
} kinds[K_COUNT] = {
    [K_I8] = {"int8", 1}, [K_U8] = {"uint8", 1}, [K_I16] = {"int16", 2},
    [K_U16] = {"uint16", 2}, [K_I32] = {"int32", 4}, [K_U32] = {"uint32", 4},
    [K_I64] = {"int64", 8}, [K_U64] = {"uint64", 8}, [K_U63] = {"uint64(<2^63)", 8},
    [K_BOOL] = {"bool", sizeof(_Bool)},
    [K_F32] = {"float", 4}, [K_F64] = {"double", 8}, [K_LD] = {"long double", sizeof(long double)},
    [K_CF32] = {"float complex", 8}, [K_CF64] = {"double complex", 16},
    [K_FLOAT_INT] = {"float_int", sizeof(float_int_t)},
    [K_DOUBLE_INT] = {"double_int", sizeof(double_int_t)},
    [K_LONG_INT] = {"long_int", sizeof(long_int_t)}, [K_2INT] = {"2int", sizeof(int_int_t)},
    [K_SHORT_INT] = {"short_int", sizeof(short_int_t)}, [K_AFF] = {"affine", sizeof(aff_t)},
};

/* Bytes of a scalar that are not data: the padding of the pair structs (not in MPI's type map)
 * and the unused tail of an x87 long double.  They are not compared where a result is written. */
static int kind_is_pad(int kind, size_t off)
{
#define PAIR_PAD(T) (!(off < sizeof(((T *) 0)->v) || \
                       (off >= offsetof(T, k) && off < offsetof(T, k) + sizeof(int))))
    switch (kind) {
    case K_LD:
        return LDBL_MANT_DIG == 64 && off >= 10;
    case K_DOUBLE_INT:
        return PAIR_PAD(double_int_t);
    case K_LONG_INT:
        return PAIR_PAD(long_int_t);
    case K_SHORT_INT:
        return PAIR_PAD(short_int_t);
    case K_FLOAT_INT:
        return PAIR_PAD(float_int_t);
    default:
        return 0;
    }
#undef PAIR_PAD
}

static int kind_has_pad(int kind)
{
    for (size_t i = 0; i < kinds[kind].size; ++i) {
        if (kind_is_pad(kind, i)) {
            return 1;
        }
    }
    return 0;
}

/* ---- ops and the value classes that keep their results exact ------------------------------ */

enum {
    O_SUM, O_PROD, O_MIN, O_MAX, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR,
    O_MINLOC, O_MAXLOC,
    O_UPROD, /* user, commutative: product mod 2^n on integer slots */
    O_AFF,   /* user, not commutative: composition of affine maps */
    O_COUNT
};

/* Value classes: what the generator draws so that every result is exact and free of overflow
 * (sums and products of small integers, also for floats), or full-range for min/max/bitwise. */
enum { C_ANY, C_SUM, C_PROD, C_MINMAX, C_LOGIC, C_BIT, C_LOC, C_USER };

typedef struct {
    const char *name;
    MPI_Op op;
    int cls;
} opdesc_t;

static opdesc_t ops[O_COUNT] = {
    [O_SUM] = {"MPI_SUM", MPI_OP_NULL, C_SUM},      [O_PROD] = {"MPI_PROD", MPI_OP_NULL, C_PROD},
    [O_MIN] = {"MPI_MIN", MPI_OP_NULL, C_MINMAX},   [O_MAX] = {"MPI_MAX", MPI_OP_NULL, C_MINMAX},
    [O_LAND] = {"MPI_LAND", MPI_OP_NULL, C_LOGIC},  [O_LOR] = {"MPI_LOR", MPI_OP_NULL, C_LOGIC},
    [O_LXOR] = {"MPI_LXOR", MPI_OP_NULL, C_LOGIC},  [O_BAND] = {"MPI_BAND", MPI_OP_NULL, C_BIT},
    [O_BOR] = {"MPI_BOR", MPI_OP_NULL, C_BIT},      [O_BXOR] = {"MPI_BXOR", MPI_OP_NULL, C_BIT},
    [O_MINLOC] = {"MPI_MINLOC", MPI_OP_NULL, C_LOC},
    [O_MAXLOC] = {"MPI_MAXLOC", MPI_OP_NULL, C_LOC},
    [O_UPROD] = {"user-prod(commutative)", MPI_OP_NULL, C_USER},
    [O_AFF] = {"user-affine(non-commutative)", MPI_OP_NULL, C_USER},
};

#define OPS_INT ((1u << O_SUM) | (1u << O_PROD) | (1u << O_MIN) | (1u << O_MAX) | \
                 (1u << O_LAND) | (1u << O_LOR) | (1u << O_LXOR) | (1u << O_BAND) | \
                 (1u << O_BOR) | (1u << O_BXOR))
#define OPS_BYTE ((1u << O_BAND) | (1u << O_BOR) | (1u << O_BXOR))
#define OPS_BOOL ((1u << O_LAND) | (1u << O_LOR) | (1u << O_LXOR))
#define OPS_FLOAT ((1u << O_SUM) | (1u << O_PROD) | (1u << O_MIN) | (1u << O_MAX))
#define OPS_COMPLEX ((1u << O_SUM) | (1u << O_PROD))
#define OPS_LOC ((1u << O_MINLOC) | (1u << O_MAXLOC))
#define OPS_UPROD (1u << O_UPROD)
#define OPS_AFF (1u << O_AFF)

/* ---- datatypes: the MPI handle and where each scalar of one element lies ------------------ */

#define MAX_SLOTS 8

typedef struct {
    const char *name;
    MPI_Datatype dt;
    int kind_for_predef; /* the single kind of a predefined type */
    unsigned ops;        /* ops this test applies to the type */
    int derived;
    int nslots;
    struct {
        int kind;
        ptrdiff_t disp;
    } slot[MAX_SLOTS];
    MPI_Aint lb, extent, true_lb, true_ub;
    size_t packed; /* bytes of one element's scalars, packed */
    int dense;     /* one slot at 0, extent == size, no padding: memcpy is the layout */
} tdesc_t;

#define MAX_TYPES 48
static tdesc_t types[MAX_TYPES];
static int ntypes = 0;

static tdesc_t *type_add(const char *name, MPI_Datatype dt, unsigned ops_mask, int derived)
{
    tdesc_t *t = &types[ntypes++];
    memset(t, 0, sizeof(*t));
    t->name = name;
    t->dt = dt;
    t->ops = ops_mask;
    t->derived = derived;
    return t;
}

static void type_slot(tdesc_t *t, int kind, ptrdiff_t disp)
{
    t->slot[t->nslots].kind = kind;
    t->slot[t->nslots].disp = disp;
    t->nslots++;
}

/* Fill in the extents from MPI and check them against the slots this test believes in. */
static int type_finish(tdesc_t *t)
{
    ptrdiff_t lo = PTRDIFF_MAX, hi = PTRDIFF_MIN;
    MPI_Aint tlb, text;
    MPI_Type_get_extent(t->dt, &t->lb, &t->extent);
    MPI_Type_get_true_extent(t->dt, &tlb, &text);
    t->true_lb = tlb;
    t->true_ub = tlb + text;
    t->packed = 0;
    for (int s = 0; s < t->nslots; ++s) {
        int k = t->slot[s].kind;
        t->packed += kinds[k].size;
        if (t->slot[s].disp < lo) {
            lo = t->slot[s].disp;
        }
        if (t->slot[s].disp + (ptrdiff_t) kinds[k].size > hi) {
            hi = t->slot[s].disp + (ptrdiff_t) kinds[k].size;
        }
    }
    t->dense = 1 == t->nslots && 0 == t->slot[0].disp &&
               t->extent == (MPI_Aint) kinds[t->slot[0].kind].size &&
               !kind_has_pad(t->slot[0].kind);
    /* Predefined pairs: MPI's true extent may stop before the struct's tail padding. */
    if (lo != t->true_lb || (hi != t->true_ub && !kind_has_pad(t->slot[0].kind))) {
        fprintf(stderr, "type %s: MPI true extent [%ld,%ld) but the test expects [%ld,%ld)\n",
                t->name, (long) t->true_lb, (long) t->true_ub, (long) lo, (long) hi);
        return 0;
    }
    if (hi > t->true_ub) {
        t->true_ub = hi;
    }
    return 1;
}

static tdesc_t *predef(const char *name, MPI_Datatype dt, int kind, unsigned ops_mask)
{
    tdesc_t *t = type_add(name, dt, ops_mask, 0);
    t->kind_for_predef = kind;
    type_slot(t, kind, 0);
    return t;
}

static const tdesc_t *type_by_name(const char *name)
{
    for (int i = 0; i < ntypes; ++i) {
        if (0 == strcmp(types[i].name, name)) {
            return &types[i];
        }
    }
    return NULL;
}

static const tdesc_t *type_by_handle(MPI_Datatype dt)
{
    for (int i = 0; i < ntypes; ++i) {
        if (types[i].dt == dt) {
            return &types[i];
        }
    }
    return NULL;
}

/* ---- random values ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rnd_at(uint64_t key, uint64_t idx)
{
    return mix64(key + (idx + 1) * 0x9E3779B97F4A7C15ull);
}

/* An integer of the given width drawn for the value class (returned as its bit pattern). */
static inline uint64_t gen_int(int bits, int is_signed, int cls, uint64_t r)
{
    switch (cls) {
    case C_SUM: {
        /* |v| < 2^(bits-5): a sum over up to 16 ranks never overflows */
        uint64_t span = (uint64_t) 1 << (bits - 5);
        if (is_signed) {
            return (uint64_t) ((int64_t) (r % (2 * span - 1)) - (int64_t) (span - 1));
        }
        return r % (span * 2);
    }
    case C_PROD: {
        static const int64_t s[4] = {1, -1, 2, -2};
        static const int64_t u[4] = {1, 2, 3, 1};
        return (uint64_t) (is_signed ? s[r & 3] : u[r & 3]);
    }
    case C_LOGIC: {
        /* zero a quarter of the time; true values other than 1 too */
        static const int64_t v[4] = {0, 1, 2, -1};
        return (uint64_t) v[r & 3];
    }
    case C_USER:
        return r | 1; /* odd: products never collapse to zero */
    default:
        return r;
    }
}

static inline double gen_real(int cls, uint64_t r, int wide)
{
    static const double prod[6] = {1.0, -1.0, 2.0, -2.0, 0.5, -0.5};
    switch (cls) {
    case C_SUM:
        return (double) ((int64_t) (r % 2001) - 1000);
    case C_PROD:
        return prod[r % 6];
    case C_LOC:
        return (double) (r % 4); /* many ties: exercises the index rule */
    default:
        if (wide) {
            return (double) ((int64_t) (r >> 11) - ((int64_t) 1 << 52)) / 4096.0;
        }
        return (double) ((int32_t) (r >> 40) - (1 << 23)) / 256.0; /* exact in a float */
    }
}

static inline void gen_scalar(int kind, int cls, uint64_t r, uint8_t *out)
{
    switch (kind) {
    case K_I8: { int8_t v = (int8_t) gen_int(8, 1, cls, r); memcpy(out, &v, 1); break; }
    case K_U8: { uint8_t v = (uint8_t) gen_int(8, 0, cls, r); memcpy(out, &v, 1); break; }
    case K_I16: { int16_t v = (int16_t) gen_int(16, 1, cls, r); memcpy(out, &v, 2); break; }
    case K_U16: { uint16_t v = (uint16_t) gen_int(16, 0, cls, r); memcpy(out, &v, 2); break; }
    case K_I32: { int32_t v = (int32_t) gen_int(32, 1, cls, r); memcpy(out, &v, 4); break; }
    case K_U32: { uint32_t v = (uint32_t) gen_int(32, 0, cls, r); memcpy(out, &v, 4); break; }
    case K_I64: { int64_t v = (int64_t) gen_int(64, 1, cls, r); memcpy(out, &v, 8); break; }
    case K_U64: { uint64_t v = gen_int(64, 0, cls, r); memcpy(out, &v, 8); break; }
    case K_U63: { uint64_t v = gen_int(64, 0, cls, r) & INT64_MAX; memcpy(out, &v, 8); break; }
    case K_BOOL: { _Bool v = (r >> 7) & 1; memcpy(out, &v, sizeof(v)); break; }
    case K_F32: { float v = (float) gen_real(cls, r, 0); memcpy(out, &v, 4); break; }
    case K_F64: { double v = gen_real(cls, r, 1); memcpy(out, &v, 8); break; }
    case K_LD: {
        long double v = C_ANY == cls || C_MINMAX == cls ? (long double) (int64_t) r / 8.0L
                                                        : (long double) gen_real(cls, r, 1);
        memset(out, 0, sizeof(v));
        memcpy(out, &v, LDBL_MANT_DIG == 64 ? 10 : sizeof(v));
        break;
    }
    case K_CF32: {
        float v[2];
        if (C_PROD == cls) {
            static const float p[4] = {1, -1, 2, -2}; /* no zero part: no signed zeros */
            v[0] = p[r & 3];
            v[1] = p[(r >> 2) & 3];
        } else {
            v[0] = (float) gen_real(cls, r, 0);
            v[1] = (float) gen_real(cls, mix64(r), 0);
        }
        memcpy(out, v, 8);
        break;
    }
    case K_CF64: {
        double v[2];
        if (C_PROD == cls) {
            static const double p[4] = {1, -1, 2, -2};
            v[0] = p[r & 3];
            v[1] = p[(r >> 2) & 3];
        } else {
            v[0] = gen_real(cls, r, 1);
            v[1] = gen_real(cls, mix64(r), 1);
        }
        memcpy(out, v, 16);
        break;
    }
#define GEN_PAIR(T, VT)                                                                   \
    {                                                                                     \
        T p;                                                                              \
        memset(&p, 0, sizeof(p));                                                         \
        p.v = C_LOC == cls ? (VT) (r % 4) : (VT) (int32_t) (r >> 20);                     \
        p.k = C_LOC == cls ? (int) ((r >> 32) % 100) : (int) (r >> 32);                   \
        memcpy(out, &p, sizeof(p));                                                       \
        break;                                                                            \
    }
    case K_FLOAT_INT: GEN_PAIR(float_int_t, float)
    case K_DOUBLE_INT: GEN_PAIR(double_int_t, double)
    case K_LONG_INT: GEN_PAIR(long_int_t, long)
    case K_2INT: GEN_PAIR(int_int_t, int)
    case K_SHORT_INT: GEN_PAIR(short_int_t, short)
#undef GEN_PAIR
    case K_AFF: {
        aff_t a = {(uint32_t) r | 1, (uint32_t) (r >> 32)};
        memcpy(out, &a, sizeof(a));
        break;
    }
    default:
        abort();
    }
}

/* Elements [first, first+n) of the input stream key, packed (each element's scalars in slot
 * order, no gaps). */
static void gen_packed(const tdesc_t *t, int cls, uint64_t key, size_t first, size_t n,
                       uint8_t *out)
{
    size_t ns = (size_t) t->nslots;
    if (1 == ns) {
        int kind = t->slot[0].kind;
        size_t sz = kinds[kind].size;
        for (size_t e = 0; e < n; ++e) {
            gen_scalar(kind, cls, rnd_at(key, first + e), out + e * sz);
        }
        return;
    }
    for (size_t e = 0; e < n; ++e) {
        for (size_t s = 0; s < ns; ++s) {
            int kind = t->slot[s].kind;
            gen_scalar(kind, cls, rnd_at(key, (first + e) * ns + s), out);
            out += kinds[kind].size;
        }
    }
}

/* ---- the reference reduction: acc = acc (op) x, acc holding the lower ranks --------------- */

static void fold_kind(int kind, int op, void *accv, const void *xv, size_t n)
{
#define LOOP(CT, EXPR)                                                                    \
    do {                                                                                  \
        CT *a = (CT *) accv;                                                              \
        const CT *b = (const CT *) xv;                                                    \
        for (size_t i = 0; i < n; ++i) {                                                  \
            a[i] = (CT) (EXPR);                                                           \
        }                                                                                 \
    } while (0)
#define INT_FOLD(CT)                                                                      \
    switch (op) {                                                                         \
    case O_SUM: LOOP(CT, (uint64_t) a[i] + (uint64_t) b[i]); return;                      \
    case O_PROD:                                                                          \
    case O_UPROD: LOOP(CT, (uint64_t) a[i] * (uint64_t) b[i]); return;                    \
    case O_MIN: LOOP(CT, b[i] < a[i] ? b[i] : a[i]); return;                              \
    case O_MAX: LOOP(CT, b[i] > a[i] ? b[i] : a[i]); return;                              \
    case O_LAND: LOOP(CT, a[i] && b[i]); return;                                          \
    case O_LOR: LOOP(CT, a[i] || b[i]); return;                                           \
    case O_LXOR: LOOP(CT, !a[i] != !b[i]); return;                                        \
    case O_BAND: LOOP(CT, a[i] & b[i]); return;                                           \
    case O_BOR: LOOP(CT, a[i] | b[i]); return;                                            \
    case O_BXOR: LOOP(CT, a[i] ^ b[i]); return;                                           \
    default: break;                                                                       \
    }                                                                                     \
    break
#define REAL_FOLD(CT)                                                                     \
    switch (op) {                                                                         \
    case O_SUM: LOOP(CT, a[i] + b[i]); return;                                            \
    case O_PROD: LOOP(CT, a[i] * b[i]); return;                                           \
    case O_MIN: LOOP(CT, b[i] < a[i] ? b[i] : a[i]); return;                              \
    case O_MAX: LOOP(CT, b[i] > a[i] ? b[i] : a[i]); return;                              \
    default: break;                                                                       \
    }                                                                                     \
    break
#define CPLX_FOLD(CT)                                                                     \
    do {                                                                                  \
        CT *a = (CT *) accv;                                                              \
        const CT *b = (const CT *) xv;                                                    \
        if (O_SUM == op) {                                                                \
            for (size_t i = 0; i < 2 * n; ++i) {                                          \
                a[i] += b[i];                                                             \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
        if (O_PROD == op) {                                                               \
            for (size_t i = 0; i < n; ++i) {                                              \
                CT re = a[2 * i] * b[2 * i] - a[2 * i + 1] * b[2 * i + 1];                \
                CT im = a[2 * i] * b[2 * i + 1] + a[2 * i + 1] * b[2 * i];                \
                a[2 * i] = re;                                                            \
                a[2 * i + 1] = im;                                                        \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
    } while (0);                                                                          \
    break
#define LOC_FOLD(T)                                                                       \
    do {                                                                                  \
        T *a = (T *) accv;                                                                \
        const T *b = (const T *) xv;                                                      \
        for (size_t i = 0; i < n; ++i) {                                                  \
            int better = O_MINLOC == op ? b[i].v < a[i].v : b[i].v > a[i].v;              \
            if (better) {                                                                 \
                a[i].v = b[i].v;                                                          \
                a[i].k = b[i].k;                                                          \
            } else if (b[i].v == a[i].v && b[i].k < a[i].k) {                             \
                a[i].k = b[i].k;                                                          \
            }                                                                             \
        }                                                                                 \
        return;                                                                           \
    } while (0);                                                                          \
    break

    switch (kind) {
    case K_I8: INT_FOLD(int8_t);
    case K_U8: INT_FOLD(uint8_t);
    case K_I16: INT_FOLD(int16_t);
    case K_U16: INT_FOLD(uint16_t);
    case K_I32: INT_FOLD(int32_t);
    case K_U32: INT_FOLD(uint32_t);
    case K_I64: INT_FOLD(int64_t);
    case K_U64: INT_FOLD(uint64_t);
    case K_U63: INT_FOLD(uint64_t);
    case K_BOOL:
        switch (op) {
        case O_LAND: LOOP(_Bool, a[i] && b[i]); return;
        case O_LOR: LOOP(_Bool, a[i] || b[i]); return;
        case O_LXOR: LOOP(_Bool, a[i] != b[i]); return;
        default: break;
        }
        break;
    case K_F32: REAL_FOLD(float);
    case K_F64: REAL_FOLD(double);
    case K_LD: {
        /* through local variables: only the 10 value bytes of the slots are meaningful */
        uint8_t *a = (uint8_t *) accv;
        const uint8_t *b = (const uint8_t *) xv;
        for (size_t i = 0; i < n; ++i) {
            long double x = 0, y = 0, z;
            memcpy(&x, a + i * sizeof(x), LDBL_MANT_DIG == 64 ? 10 : sizeof(x));
            memcpy(&y, b + i * sizeof(y), LDBL_MANT_DIG == 64 ? 10 : sizeof(y));
            switch (op) {
            case O_SUM: z = x + y; break;
            case O_PROD: z = x * y; break;
            case O_MIN: z = y < x ? y : x; break;
            case O_MAX: z = y > x ? y : x; break;
            default: abort();
            }
            memset(a + i * sizeof(z), 0, sizeof(z));
            memcpy(a + i * sizeof(z), &z, LDBL_MANT_DIG == 64 ? 10 : sizeof(z));
        }
        return;
    }
    case K_CF32: CPLX_FOLD(float);
    case K_CF64: CPLX_FOLD(double);
    case K_FLOAT_INT: LOC_FOLD(float_int_t);
    case K_DOUBLE_INT: LOC_FOLD(double_int_t);
    case K_LONG_INT: LOC_FOLD(long_int_t);
    case K_2INT: LOC_FOLD(int_int_t);
    case K_SHORT_INT: LOC_FOLD(short_int_t);
    case K_AFF: {
        aff_t *a = (aff_t *) accv;
        const aff_t *b = (const aff_t *) xv;
        for (size_t i = 0; i < n; ++i) {
            /* a after b: t -> a.a * (b.a * t + b.b) + a.b */
            aff_t c = {a[i].a * b[i].a, a[i].a * b[i].b + a[i].b};
            a[i] = c;
        }
        return;
    }
    default:
        break;
    }
    fprintf(stderr, "fold: op %d is not defined on %s\n", op, kinds[kind].name);
    abort();
#undef LOOP
#undef INT_FOLD
#undef REAL_FOLD
#undef CPLX_FOLD
#undef LOC_FOLD
}

/* Packed elements of a type whose slots all have one kind. */
static void fold_packed(const tdesc_t *t, int op, uint8_t *acc, const uint8_t *x, size_t n)
{
    fold_kind(t->slot[0].kind, op, acc, x, n * (size_t) t->nslots);
}

/* ---- user-defined ops: they walk the type's slots, so they work on derived types too ------- */

static void user_op_apply(int op, void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const tdesc_t *t = type_by_handle(*dt);
    if (NULL == t) {
        fprintf(stderr, "user op called with a datatype this test did not create\n");
        abort();
    }
    for (int e = 0; e < *len; ++e) {
        for (int s = 0; s < t->nslots; ++s) {
            ptrdiff_t off = (ptrdiff_t) e * t->extent + t->slot[s].disp;
            int kind = t->slot[s].kind;
            uint8_t acc[16], x[16];
            /* MPI: inout = in (op) inout, in holding the lower ranks */
            memcpy(acc, (uint8_t *) in + off, kinds[kind].size);
            memcpy(x, (uint8_t *) inout + off, kinds[kind].size);
            fold_kind(kind, op, acc, x, 1);
            memcpy((uint8_t *) inout + off, acc, kinds[kind].size);
        }
    }
}

static void user_uprod(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    user_op_apply(O_UPROD, in, inout, len, dt);
}

static void user_aff(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    user_op_apply(O_AFF, in, inout, len, dt);
}

/* ---- formatting for diagnostics ------------------------------------------------------------ */

static void fmt_scalar(int kind, const uint8_t *p, char *out, size_t len)
{
    int64_t i = 0;
    uint64_t u = 0;
    double d[2] = {0, 0};
    long double ld = 0;
    int k = 0;

    switch (kind) {
    case K_I8: { int8_t v; memcpy(&v, p, 1); i = v; break; }
    case K_I16: { int16_t v; memcpy(&v, p, 2); i = v; break; }
    case K_I32: { int32_t v; memcpy(&v, p, 4); i = v; break; }
    case K_I64: { int64_t v; memcpy(&v, p, 8); i = v; break; }
    case K_U8: case K_BOOL: u = p[0]; break;
    case K_U16: { uint16_t v; memcpy(&v, p, 2); u = v; break; }
    case K_U32: { uint32_t v; memcpy(&v, p, 4); u = v; break; }
    case K_U64: case K_U63: memcpy(&u, p, 8); break;
    case K_F32: { float v; memcpy(&v, p, 4); d[0] = v; break; }
    case K_F64: memcpy(&d[0], p, 8); break;
    case K_LD: memcpy(&ld, p, LDBL_MANT_DIG == 64 ? 10 : sizeof(ld)); break;
    case K_CF32: { float v[2]; memcpy(v, p, 8); d[0] = v[0]; d[1] = v[1]; break; }
    case K_CF64: memcpy(d, p, 16); break;
    case K_FLOAT_INT: { float_int_t v; memcpy(&v, p, sizeof(v)); d[0] = v.v; k = v.k; break; }
    case K_DOUBLE_INT: { double_int_t v; memcpy(&v, p, sizeof(v)); d[0] = v.v; k = v.k; break; }
    case K_LONG_INT: { long_int_t v; memcpy(&v, p, sizeof(v)); i = v.v; k = v.k; break; }
    case K_2INT: { int_int_t v; memcpy(&v, p, sizeof(v)); i = v.v; k = v.k; break; }
    case K_SHORT_INT: { short_int_t v; memcpy(&v, p, sizeof(v)); i = v.v; k = v.k; break; }
    case K_AFF: { aff_t v; memcpy(&v, p, sizeof(v)); i = v.a; k = (int) v.b; break; }
    default: break;
    }
    switch (kind) {
    case K_I8: case K_I16: case K_I32: case K_I64:
        snprintf(out, len, "%lld", (long long) i);
        return;
    case K_U8: case K_BOOL: case K_U16: case K_U32: case K_U64: case K_U63:
        snprintf(out, len, "%llu", (unsigned long long) u);
        return;
    case K_F32: case K_F64:
        snprintf(out, len, "%.17g", d[0]);
        return;
    case K_LD:
        snprintf(out, len, "%.21Lg", ld);
        return;
    case K_CF32: case K_CF64:
        snprintf(out, len, "(%.17g,%.17g)", d[0], d[1]);
        return;
    case K_FLOAT_INT: case K_DOUBLE_INT:
        snprintf(out, len, "(%.17g,%d)", d[0], k);
        return;
    case K_LONG_INT: case K_2INT: case K_SHORT_INT:
        snprintf(out, len, "(%lld,%d)", (long long) i, k);
        return;
    case K_AFF:
        snprintf(out, len, "(a=%u,b=%u)", (unsigned) i, (unsigned) k);
        return;
    default:
        snprintf(out, len, "?");
        return;
    }
}

/* ---- buffers: the live memory (host or device) and its expected image on the host ---------- */

typedef struct {
    const char *what; /* "sendbuf", "recvbuf" */
    const tdesc_t *t;
    mt_mem_t kind;
    size_t nelem;     /* element positions the buffer spans */
    size_t bytes;     /* of the allocation */
    size_t origin;    /* offset of element 0's origin (the pointer given to MPI) */
    uint8_t *init;    /* what was uploaded */
    uint8_t *expect;  /* what must be there after the call */
    uint8_t *care;    /* 0 where anything goes (undefined results, padding) */
    uint8_t *got;
    void *live;
    int failed_alloc;
} buf_t;

/* Chunk of elements generated at a time by the reference (bounds its temporary memory). */
#define GEN_CHUNK 65536

static uint8_t *scratch_a = NULL, *scratch_b = NULL;
static size_t scratch_len = 0;

static void scratch_need(size_t bytes)
{
    if (bytes > scratch_len) {
        free(scratch_a);
        free(scratch_b);
        scratch_a = malloc(bytes);
        scratch_b = malloc(bytes);
        scratch_len = bytes;
        if (NULL == scratch_a || NULL == scratch_b) {
            fprintf(stderr, "out of host memory for the reference\n");
            abort();
        }
    }
}

/* The host images of the two buffers of a case (send, receive) are kept from case to case and
 * only grow: the big cases would otherwise spend most of their time faulting in fresh pages. */
static struct {
    uint8_t *img[4];
    size_t cap;
} pool[2];

static void pool_get(int slot, size_t bytes, uint8_t **init, uint8_t **expect, uint8_t **care,
                     uint8_t **got)
{
    if (bytes > pool[slot].cap) {
        size_t cap = bytes + bytes / 8;
        for (int i = 0; i < 4; ++i) {
            free(pool[slot].img[i]);
            pool[slot].img[i] = malloc(cap);
            if (NULL == pool[slot].img[i]) {
                fprintf(stderr, "out of host memory for %zu bytes\n", cap);
                abort();
            }
        }
        pool[slot].cap = cap;
    }
    *init = pool[slot].img[0];
    *expect = pool[slot].img[1];
    *care = pool[slot].img[2];
    *got = pool[slot].img[3];
}

static void pool_release(void)
{
    for (int slot = 0; slot < 2; ++slot) {
        for (int i = 0; i < 4; ++i) {
            free(pool[slot].img[i]);
            pool[slot].img[i] = NULL;
        }
        pool[slot].cap = 0;
    }
}

/* A buffer of nelem element positions of type t, host or device (or none), its images in
 * pool slot (0 send, 1 receive). */
static void buf_create(buf_t *b, const char *what, const tdesc_t *t, size_t nelem, mt_mem_t kind)
{
    size_t lo_pad = t->true_lb < 0 ? (size_t) (-t->true_lb) : 0;
    size_t end;
    memset(b, 0, sizeof(*b));
    b->what = what;
    b->t = t;
    b->kind = kind;
    b->nelem = nelem;
    if (MT_MEM_NONE == kind) {
        return;
    }
    b->origin = GUARD + ((lo_pad + 15) & ~(size_t) 15);
    end = b->origin;
    if (nelem > 0) {
        end = (size_t) ((ptrdiff_t) b->origin + (ptrdiff_t) (nelem - 1) * t->extent + t->true_ub);
    }
    b->bytes = ((end + GUARD) + 63) & ~(size_t) 63;
    pool_get(0 == strcmp(what, "sendbuf") ? 0 : 1, b->bytes, &b->init, &b->expect, &b->care,
             &b->got);
    b->live = mt_mem_alloc(kind, b->bytes);
    b->failed_alloc = NULL == b->live;
    memset(b->init, POISON, b->bytes);
}

static void buf_free(buf_t *b)
{
    if (MT_MEM_NONE == b->kind) {
        return;
    }
    mt_mem_free(b->kind, b->live);
    memset(b, 0, sizeof(*b));
}

static void *buf_ptr(const buf_t *b)
{
    if (MT_MEM_NONE == b->kind || NULL == b->live) {
        return NULL;
    }
    return (uint8_t *) b->live + b->origin;
}

/* Write n packed elements at element position at of an image; mark their padding don't-care. */
static void place(const buf_t *b, uint8_t *img, uint8_t *care, size_t at, size_t n,
                  const uint8_t *packed)
{
    const tdesc_t *t = b->t;
    if (t->dense) {
        memcpy(img + b->origin + at * (size_t) t->extent, packed, n * (size_t) t->extent);
        return;
    }
    for (size_t e = 0; e < n; ++e) {
        for (int s = 0; s < t->nslots; ++s) {
            int kind = t->slot[s].kind;
            size_t sz = kinds[kind].size;
            size_t off = (size_t) ((ptrdiff_t) b->origin + (ptrdiff_t) (at + e) * t->extent +
                                   t->slot[s].disp);
            memcpy(img + off, packed, sz);
            if (NULL != care) {
                for (size_t i = 0; i < sz; ++i) {
                    if (kind_is_pad(kind, i)) {
                        care[off + i] = 0;
                    }
                }
            }
            packed += sz;
        }
    }
}

/* Initial content: elements [at, at+n) = input stream key from element first. */
static void buf_fill(buf_t *b, size_t at, size_t n, int cls, uint64_t key, size_t first)
{
    if (MT_MEM_NONE == b->kind) {
        return;
    }
    scratch_need(GEN_CHUNK * b->t->packed);
    for (size_t done = 0; done < n; done += GEN_CHUNK) {
        size_t m = n - done < GEN_CHUNK ? n - done : GEN_CHUNK;
        gen_packed(b->t, cls, key, first + done, m, scratch_a);
        place(b, b->init, NULL, at + done, m, scratch_a);
    }
}

/* Upload the initial image; the expected image starts as a copy of it.  0 on success. */
static int buf_arm(buf_t *b, char *diag)
{
    if (MT_MEM_NONE == b->kind) {
        return 0;
    }
    memcpy(b->expect, b->init, b->bytes);
    memset(b->care, 1, b->bytes);
    if (b->failed_alloc) {
        mt_diag_add(diag, "could not allocate %zu bytes of %s memory for %s; ", b->bytes,
                    mt_mem_name(b->kind), b->what);
        return -1;
    }
    if (0 != mt_mem_put(b->kind, b->live, b->init, b->bytes)) {
        mt_diag_add(diag, "upload of %s failed: %s; ", b->what, dev_error_string());
        return -1;
    }
    return 0;
}

/* Expected: elements [at, at+n) = input stream key from element first. */
static void buf_expect_gen(buf_t *b, size_t at, size_t n, int cls, uint64_t key, size_t first)
{
    scratch_need(GEN_CHUNK * b->t->packed);
    for (size_t done = 0; done < n; done += GEN_CHUNK) {
        size_t m = n - done < GEN_CHUNK ? n - done : GEN_CHUNK;
        gen_packed(b->t, cls, key, first + done, m, scratch_a);
        place(b, b->expect, b->care, at + done, m, scratch_a);
    }
}

/* Expected: elements [at, at+n) = keys[0] (op) keys[1] (op) ... of the streams from first. */
static void buf_expect_fold(buf_t *b, size_t at, size_t n, int cls, int op, const uint64_t *keys,
                            int nkeys, size_t first)
{
    scratch_need(GEN_CHUNK * b->t->packed);
    for (size_t done = 0; done < n; done += GEN_CHUNK) {
        size_t m = n - done < GEN_CHUNK ? n - done : GEN_CHUNK;
        gen_packed(b->t, cls, keys[0], first + done, m, scratch_a);
        for (int k = 1; k < nkeys; ++k) {
            gen_packed(b->t, cls, keys[k], first + done, m, scratch_b);
            fold_packed(b->t, op, scratch_a, scratch_b, m);
        }
        place(b, b->expect, b->care, at + done, m, scratch_a);
    }
}

/* Elements [at, at+n) are undefined after the call (gaps between them included). */
static void buf_dontcare(buf_t *b, size_t at, size_t n)
{
    size_t lo, hi;
    if (MT_MEM_NONE == b->kind || 0 == n) {
        return;
    }
    lo = (size_t) ((ptrdiff_t) b->origin + (ptrdiff_t) at * b->t->extent + b->t->true_lb);
    hi = (size_t) ((ptrdiff_t) b->origin + (ptrdiff_t) (at + n - 1) * b->t->extent +
                   b->t->true_ub);
    memset(b->care + lo, 0, hi - lo);
}

/* Where byte off of the buffer lies, for a diagnostic. */
static void describe(const buf_t *b, size_t off, char *out, size_t len)
{
    const tdesc_t *t = b->t;
    ptrdiff_t rel = (ptrdiff_t) off - (ptrdiff_t) b->origin;
    char ev[96], gv[96];
    ptrdiff_t e;
    if (b->nelem > 0 && rel >= t->true_lb &&
        rel < (ptrdiff_t) (b->nelem - 1) * t->extent + t->true_ub) {
        e = (rel - t->true_lb) / t->extent;
        for (ptrdiff_t ee = e - 1; ee <= e + 1; ++ee) {
            for (int s = 0; ee >= 0 && ee < (ptrdiff_t) b->nelem && s < t->nslots; ++s) {
                ptrdiff_t start = ee * t->extent + t->slot[s].disp;
                int kind = t->slot[s].kind;
                if (rel >= start && rel < start + (ptrdiff_t) kinds[kind].size) {
                    size_t at = (size_t) ((ptrdiff_t) b->origin + start);
                    fmt_scalar(kind, b->expect + at, ev, sizeof(ev));
                    fmt_scalar(kind, b->got + at, gv, sizeof(gv));
                    snprintf(out, len, "%s(%s) first wrong element %td (slot %d, %s, byte %td): "
                             "expected %s got %s", b->what, mt_mem_name(b->kind), ee, s,
                             kinds[kind].name, rel - start, ev, gv);
                    return;
                }
            }
        }
        snprintf(out, len, "%s(%s) gap byte %td inside element %td: expected 0x%02x got 0x%02x",
                 b->what, mt_mem_name(b->kind), rel - e * t->extent, e, b->expect[off],
                 b->got[off]);
        return;
    }
    snprintf(out, len, "%s(%s) guard byte at %td from the buffer origin (%zu elements): "
             "expected 0x%02x got 0x%02x", b->what, mt_mem_name(b->kind), rel, b->nelem,
             b->expect[off], b->got[off]);
}

/* First byte where got differs from expect and care is set; -1 when none. */
static ptrdiff_t first_mismatch(const uint8_t *got, const uint8_t *expect, const uint8_t *care,
                                size_t bytes)
{
    const size_t chunk = 4096;
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t len = bytes - off < chunk ? bytes - off : chunk;
        if (0 == memcmp(got + off, expect + off, len)) {
            continue;
        }
        for (size_t i = off; i < off + len; ++i) {
            if (care[i] && got[i] != expect[i]) {
                return (ptrdiff_t) i;
            }
        }
    }
    return -1;
}

/* Floating-point zeros compare equal whatever their sign: the sign of a zero produced by
 * cancellation depends on the order of the reduction, which MPI leaves open. */
static void unify_zero_signs(int kind, uint8_t *got, const uint8_t *exp)
{
    int nf = 0, nd = 0;
    switch (kind) {
    case K_F32: case K_FLOAT_INT: nf = 1; break;
    case K_CF32: nf = 2; break;
    case K_F64: case K_DOUBLE_INT: nd = 1; break;
    case K_CF64: nd = 2; break;
    case K_LD: {
        long double g = 0, e = 0;
        memcpy(&g, got, LDBL_MANT_DIG == 64 ? 10 : sizeof(g));
        memcpy(&e, exp, LDBL_MANT_DIG == 64 ? 10 : sizeof(e));
        if (0 == g && 0 == e) {
            memcpy(got, exp, LDBL_MANT_DIG == 64 ? 10 : sizeof(g));
        }
        return;
    }
    default: return;
    }
    for (int i = 0; i < nf; ++i) {
        float g, e;
        memcpy(&g, got + 4 * i, 4);
        memcpy(&e, exp + 4 * i, 4);
        if (0 == g && 0 == e) {
            memcpy(got + 4 * i, exp + 4 * i, 4);
        }
    }
    for (int i = 0; i < nd; ++i) {
        double g, e;
        memcpy(&g, got + 8 * i, 8);
        memcpy(&e, exp + 8 * i, 8);
        if (0 == g && 0 == e) {
            memcpy(got + 8 * i, exp + 8 * i, 8);
        }
    }
}

static int kind_is_float(int kind)
{
    return K_F32 == kind || K_F64 == kind || K_LD == kind || K_CF32 == kind || K_CF64 == kind ||
           K_FLOAT_INT == kind || K_DOUBLE_INT == kind;
}

/* Read the buffer back and compare it with the expected image.  1 when it matches. */
static int buf_verify(buf_t *b, char *diag)
{
    ptrdiff_t bad;
    char where[400];
    if (MT_MEM_NONE == b->kind || b->failed_alloc) {
        return 1;
    }
    memset(b->got, 0x5A, b->bytes);
    if (0 != mt_mem_get(b->kind, b->got, b->live, b->bytes)) {
        mt_diag_add(diag, "download of %s failed: %s; ", b->what, dev_error_string());
        return 0;
    }
    for (int s = 0; s < b->t->nslots; ++s) {
        int kind = b->t->slot[s].kind;
        if (!kind_is_float(kind)) {
            continue;
        }
        for (size_t e = 0; e < b->nelem; ++e) {
            size_t off = (size_t) ((ptrdiff_t) b->origin + (ptrdiff_t) e * b->t->extent +
                                   b->t->slot[s].disp);
            unify_zero_signs(kind, b->got + off, b->expect + off);
        }
    }
    bad = first_mismatch(b->got, b->expect, b->care, b->bytes);
    if (bad < 0) {
        return 1;
    }
    describe(b, (size_t) bad, where, sizeof(where));
    mt_diag_add(diag, "%s; ", where);
    return 0;
}

/* ---- cases --------------------------------------------------------------------------------- */

enum {
    BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLGATHERV, ALLTOALL, ALLTOALLV, ALLTOALLW,
    GATHER, GATHERV, SCATTER, SCATTERV, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, SCAN, EXSCAN,
    BARRIER,
    NCOLL,
    /* the neighborhood collectives, on the topologies of the neighbor section only */
    NBR_ALLGATHER = NCOLL, NBR_ALLGATHERV, NBR_ALLTOALL, NBR_ALLTOALLV, NBR_ALLTOALLW,
    NCOLL_ALL
};

static const char *coll_names[NCOLL_ALL] = {
    "bcast", "reduce", "allreduce", "allgather", "allgatherv", "alltoall", "alltoallv",
    "alltoallw", "gather", "gatherv", "scatter", "scatterv", "reduce_scatter",
    "reduce_scatter_block", "scan", "exscan", "barrier",
    "neighbor_allgather", "neighbor_allgatherv", "neighbor_alltoall", "neighbor_alltoallv",
    "neighbor_alltoallw",
};

static int coll_is_neighbor(int c)
{
    return c >= NCOLL;
}

static int coll_is_reduction(int c)
{
    return REDUCE == c || ALLREDUCE == c || REDUCE_SCATTER == c || REDUCE_SCATTER_BLOCK == c ||
           SCAN == c || EXSCAN == c;
}

static int coll_is_rooted(int c)
{
    return BCAST == c || REDUCE == c || GATHER == c || GATHERV == c || SCATTER == c ||
           SCATTERV == c;
}

/* Where MPI allows MPI_IN_PLACE (for rooted collectives: at the root). */
static int coll_has_inplace(int c)
{
    return BCAST != c && BARRIER != c;
}

enum { M_HOST, M_DEV, M_MIXED, M_ROOTDEV, M_ROOTHOST, M_SDEV, M_RDEV, NMODE };
static const char *mode_names[NMODE] = {
    "host", "dev", "mixed(even ranks dev)", "root-dev(others host)", "root-host(others dev)",
    "send-dev/recv-host", "send-host/recv-dev",
};

enum { CM_WORLD, CM_SPLIT, CM_UNEVEN, CM_DUP, CM_SELF, NCOMM };
static const char *comm_names[NCOMM] = {
    "world", "split(odd/even)", "split(uneven)", "dup", "self",
};
static MPI_Comm comms[NCOMM];

/* The virtual topologies of the neighbor section (created there, world ranks kept). */
enum { TP_RING, TP_GRID, TP_GRAPH, NTOPO };
static const char *topo_names[NTOPO] = {
    "cart(1-D ring, periodic)", "cart(2-D grid, not periodic)", "dist_graph(uneven degrees)",
};
static MPI_Comm topo_comms[NTOPO] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};

enum { ROOT_LAST, ROOT_0, ROOT_MID };
static const char *root_names[3] = {"last", "0", "mid"};

enum { ROLE_SEND, ROLE_RECV };

typedef struct {
    int coll;
    const tdesc_t *t;
    int op; /* -1 for data movement */
    size_t n;
    int mode;
    int comm_id;
    int inplace;
    int root_sel;
    int nb; /* the nonblocking variant: 1 MPI_I... and MPI_Wait, 2 MPI_I... and MPI_Test polling */
    int topo; /* the neighborhood collectives: TP_... */
    /* filled in when run */
    MPI_Comm comm;
    int P, r, root, cls;
    uint64_t key;
} case_t;

static uint64_t seed = 20261129;
static uint64_t case_counter = 0;
static const char *filter = NULL;
static const char *exclude = NULL;
static int list_only = 0;

static mt_mem_t mem_of(const case_t *c, int rank, int role)
{
    switch (c->mode) {
    case M_HOST: return MT_MEM_HOST;
    case M_DEV: return MT_MEM_DEVICE;
    case M_MIXED: return 0 == rank % 2 ? MT_MEM_DEVICE : MT_MEM_HOST;
    case M_ROOTDEV: return rank == c->root ? MT_MEM_DEVICE : MT_MEM_HOST;
    case M_ROOTHOST: return rank == c->root ? MT_MEM_HOST : MT_MEM_DEVICE;
    case M_SDEV: return ROLE_SEND == role ? MT_MEM_DEVICE : MT_MEM_HOST;
    case M_RDEV: return ROLE_SEND == role ? MT_MEM_HOST : MT_MEM_DEVICE;
    default: abort();
    }
}

/* The input stream of a rank in this case. */
static uint64_t key_of(const case_t *c, int rank)
{
    return mix64(c->key ^ (0x5851F42D4C957F2Dull * (uint64_t) (rank + 1)));
}

/* Per-rank counts of the v-collectives and reduce_scatter: some zero, the others near n. */
static int vcount(size_t n, int k)
{
    if (1 == k % 3) {
        return 0;
    }
    return (int) (n + (n ? (size_t) k : 0));
}

/* alltoallv counts from i to j: symmetric (so that MPI_IN_PLACE is legal), some zero. */
static int a2a_count(size_t n, int i, int j)
{
    if (1 == (i + j) % 3) {
        return 0;
    }
    return (int) (n + (n ? (size_t) ((i * j) % 3) : 0));
}

/* Blocks in reverse rank order, each preceded by a one-element gap; returns the span. */
static size_t layout_blocks(int P, const int *counts, int *displs)
{
    size_t pos = 1;
    for (int k = P - 1; k >= 0; --k) {
        displs[k] = (int) pos;
        pos += (size_t) counts[k] + 1;
    }
    return pos;
}

static void case_name(const case_t *c, char *out, size_t len)
{
    snprintf(out, len, "%s%s %s %s count=%zu %s %s%s%s%s%s", c->nb ? "i" : "",
             coll_names[c->coll], c->t->name, c->op >= 0 ? ops[c->op].name : "-", c->n,
             mode_names[c->mode],
             coll_is_neighbor(c->coll) ? topo_names[c->topo] : comm_names[c->comm_id],
             c->inplace ? " in-place" : "",
             coll_is_rooted(c->coll) ? " root=" : "",
             coll_is_rooted(c->coll) ? root_names[c->root_sel] : "",
             2 == c->nb ? " MPI_Test-polled" : "");
}

/* The blocking call, or with c->nb its nonblocking twin and MPI_Wait (1) or MPI_Test polled
 * until it reports completion (2). */
#define CALL(fn, ifn, ...)                                                                 \
    do {                                                                                   \
        if (c->nb) {                                                                       \
            MPI_Request req_ = MPI_REQUEST_NULL;                                           \
            rc = ifn(__VA_ARGS__, &req_);                                                  \
            if (MPI_SUCCESS == rc && 2 == c->nb) {                                         \
                int done_ = 0;                                                             \
                while (MPI_SUCCESS == rc && !done_) {                                      \
                    rc = MPI_Test(&req_, &done_, MPI_STATUS_IGNORE);                       \
                }                                                                          \
            } else if (MPI_SUCCESS == rc) {                                                \
                rc = MPI_Wait(&req_, MPI_STATUS_IGNORE);                                   \
            }                                                                              \
        } else {                                                                           \
            rc = fn(__VA_ARGS__);                                                          \
        }                                                                                  \
        if (MPI_SUCCESS != rc) {                                                           \
            mt_diag_add(diag, "%s returned %d: %s; ", c->nb ? #ifn : #fn, rc,             \
                        mt_mpi_error(rc));                                                 \
        }                                                                                  \
    } while (0)

/* ---- neighborhood collectives ---------------------------------------------------------------- */

/* The distributed graph's edges k -> j: to the next rank, even ranks to the one after too, the
 * last rank to rank 1: in- and out-degrees differ from rank to rank (4 ranks: 2/2, 2/1, 2/2,
 * 1/2). */
static int graph_edge(int P, int k, int j)
{
    return j != k && (j == (k + 1) % P || (0 == k % 2 && j == (k + 2) % P) ||
                      (k == P - 1 && 1 == j));
}

/* A graph rank's sources (in) or destinations (out), ascending; returns their number. */
static int graph_list(int P, int rank, int out, int *list)
{
    int n = 0;
    for (int k = 0; k < P; ++k) {
        if (out ? graph_edge(P, rank, k) : graph_edge(P, k, rank)) {
            list[n++] = k;
        }
    }
    return n;
}

/* This rank's neighbours in the order of the blocks: the sources (in) and destinations (out).
 * A cartesian rank has 2 x ndims of both, the same: in each dimension the one below, then the
 * one above (MPI_PROC_NULL past a non-periodic edge). */
static void nbr_lists(const case_t *c, int *indeg, int *in, int *outdeg, int *out)
{
    if (TP_GRAPH == c->topo) {
        *indeg = graph_list(c->P, c->r, 0, in);
        *outdeg = graph_list(c->P, c->r, 1, out);
        return;
    }
    int ndims = 0;
    MPI_Cartdim_get(c->comm, &ndims);
    for (int d = 0; d < ndims; ++d) {
        MPI_Cart_shift(c->comm, d, 1, &in[2 * d], &in[2 * d + 1]);
        out[2 * d] = in[2 * d];
        out[2 * d + 1] = in[2 * d + 1];
    }
    *indeg = *outdeg = 2 * ndims;
}

/* The index of the send block that source k of this rank's receive block i sent it: in a
 * cartesian topology what comes from below was sent upwards; in the graph, r's place among k's
 * destinations. */
static int nbr_send_index(const case_t *c, int k, int i)
{
    int list[64];
    int n;
    if (TP_GRAPH != c->topo) {
        return i ^ 1;
    }
    n = graph_list(c->P, k, 1, list);
    for (int j = 0; j < n; ++j) {
        if (list[j] == c->r) {
            return j;
        }
    }
    abort();
}

/* Elements rank k sends in its block j of the v and w variants: some zero, the others near n. */
static int nbr_count(size_t n, int k, int j, int even)
{
    int v = 1 == (k + j) % 3 ? 0 : (int) (n + (n ? (size_t) ((k * (j + 1)) % 3) : 0));
    return even ? v + (v & 1) : v;
}

/* One neighborhood collective case on this rank: every send block is a stream of the sender's
 * (block index j from element j x stride); every receive block that has a source must hold what
 * the source sent it, a block whose source is MPI_PROC_NULL and every gap keep their poison. */
static int run_neighbor_case(case_t *c, char *diag)
{
    enum { MAXDEG = 64 };
    const tdesc_t *t = c->t;
    const int P = c->P, r = c->r, cls = c->cls;
    const size_t n = c->n, stride = n + 4;
    const int w = NBR_ALLTOALLW == c->coll;
    MPI_Datatype dt = t->dt, t2 = MPI_DATATYPE_NULL;
    MPI_Datatype stypes[MAXDEG], rtypes[MAXDEG];
    MPI_Aint swbytes[MAXDEG], rwbytes[MAXDEG];
    int in[MAXDEG], out[MAXDEG], indeg = 0, outdeg = 0;
    int scounts[MAXDEG], sdispls[MAXDEG], rcounts[MAXDEG], rdispls[MAXDEG];
    int swcounts[MAXDEG], rwcounts[MAXDEG], sidx[MAXDEG];
    uint64_t *keys = calloc((size_t) P, sizeof(uint64_t));
    mt_mem_t sk = mem_of(c, r, ROLE_SEND), rk = mem_of(c, r, ROLE_RECV);
    size_t sspan = 0, rspan = 0;
    buf_t sb, rb;
    int rc = MPI_SUCCESS, ok = 1;

    memset(&sb, 0, sizeof(sb));
    memset(&rb, 0, sizeof(rb));
    for (int k = 0; k < P; ++k) {
        keys[k] = key_of(c, k);
    }
    nbr_lists(c, &indeg, in, &outdeg, out);
    for (int i = 0; i < indeg; ++i) {
        sidx[i] = MPI_PROC_NULL == in[i] ? -1 : nbr_send_index(c, in[i], i);
    }

    /* the layouts: counts and displacements (in extents) of the blocks of both buffers */
    switch (c->coll) {
    case NBR_ALLGATHER:
    case NBR_ALLTOALL:
        sspan = NBR_ALLGATHER == c->coll ? n : (size_t) outdeg * n;
        rspan = (size_t) indeg * n;
        break;
    case NBR_ALLGATHERV:
        sspan = (size_t) vcount(n, r);
        for (int i = 0; i < indeg; ++i) {
            rcounts[i] = sidx[i] < 0 ? (int) n : vcount(n, in[i]);
        }
        rspan = layout_blocks(indeg, rcounts, rdispls);
        break;
    default: /* v and w */
        for (int j = 0; j < outdeg; ++j) {
            scounts[j] = nbr_count(n, r, j, w);
        }
        for (int i = 0; i < indeg; ++i) {
            rcounts[i] = sidx[i] < 0 ? (int) (n + (w ? n & 1 : 0))
                                    : nbr_count(n, in[i], sidx[i], w);
        }
        sspan = layout_blocks(outdeg, scounts, sdispls);
        rspan = layout_blocks(indeg, rcounts, rdispls);
        break;
    }

    buf_create(&sb, "sendbuf", t, sspan, sk);
    buf_create(&rb, "recvbuf", t, rspan, rk);
    switch (c->coll) {
    case NBR_ALLGATHER:
    case NBR_ALLGATHERV:
        buf_fill(&sb, 0, sspan, cls, keys[r], 0);
        break;
    case NBR_ALLTOALL:
        for (int j = 0; j < outdeg; ++j) {
            buf_fill(&sb, (size_t) j * n, n, cls, keys[r], (size_t) j * stride);
        }
        break;
    default:
        for (int j = 0; j < outdeg; ++j) {
            buf_fill(&sb, (size_t) sdispls[j], (size_t) scounts[j], cls, keys[r],
                     (size_t) j * stride);
        }
        break;
    }
    if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
        ok = 0;
        goto done;
    }

    switch (c->coll) {
    case NBR_ALLGATHER:
        CALL(MPI_Neighbor_allgather, MPI_Ineighbor_allgather, buf_ptr(&sb), (int) n, dt,
             buf_ptr(&rb), (int) n, dt, c->comm);
        break;
    case NBR_ALLGATHERV:
        CALL(MPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv, buf_ptr(&sb), (int) sspan, dt,
             buf_ptr(&rb), rcounts, rdispls, dt, c->comm);
        break;
    case NBR_ALLTOALL:
        CALL(MPI_Neighbor_alltoall, MPI_Ineighbor_alltoall, buf_ptr(&sb), (int) n, dt,
             buf_ptr(&rb), (int) n, dt, c->comm);
        break;
    case NBR_ALLTOALLV:
        CALL(MPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv, buf_ptr(&sb), scounts, sdispls, dt,
             buf_ptr(&rb), rcounts, rdispls, dt, c->comm);
        break;
    case NBR_ALLTOALLW:
        /* odd send blocks and even receive blocks travel as pairs of elements: the same type
         * signature through different types */
        MPI_Type_contiguous(2, dt, &t2);
        MPI_Type_commit(&t2);
        for (int j = 0; j < outdeg; ++j) {
            stypes[j] = 1 == j % 2 ? t2 : dt;
            swcounts[j] = 1 == j % 2 ? scounts[j] / 2 : scounts[j];
            swbytes[j] = (MPI_Aint) sdispls[j] * t->extent;
        }
        for (int i = 0; i < indeg; ++i) {
            rtypes[i] = 0 == i % 2 ? t2 : dt;
            rwcounts[i] = 0 == i % 2 ? rcounts[i] / 2 : rcounts[i];
            rwbytes[i] = (MPI_Aint) rdispls[i] * t->extent;
        }
        CALL(MPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw, buf_ptr(&sb), swcounts, swbytes,
             stypes, buf_ptr(&rb), rwcounts, rwbytes, rtypes, c->comm);
        break;
    default:
        abort();
    }

    for (int i = 0; i < indeg; ++i) {
        int k = in[i];
        if (sidx[i] < 0) {
            continue; /* MPI_PROC_NULL: left as it was */
        }
        switch (c->coll) {
        case NBR_ALLGATHER:
            buf_expect_gen(&rb, (size_t) i * n, n, cls, keys[k], 0);
            break;
        case NBR_ALLGATHERV:
            buf_expect_gen(&rb, (size_t) rdispls[i], (size_t) rcounts[i], cls, keys[k], 0);
            break;
        case NBR_ALLTOALL:
            buf_expect_gen(&rb, (size_t) i * n, n, cls, keys[k], (size_t) sidx[i] * stride);
            break;
        default:
            buf_expect_gen(&rb, (size_t) rdispls[i], (size_t) rcounts[i], cls, keys[k],
                           (size_t) sidx[i] * stride);
            break;
        }
    }
    if (MPI_SUCCESS != rc) {
        ok = 0;
    } else {
        ok &= buf_verify(&sb, diag);
        ok &= buf_verify(&rb, diag);
    }
done:
    if (MPI_DATATYPE_NULL != t2) {
        MPI_Type_free(&t2);
    }
    buf_free(&sb);
    buf_free(&rb);
    free(keys);
    return ok;
}

/* Run one case on this rank; returns 1 when its buffers came out as expected. */
static int run_case(case_t *c, char *diag)
{
    const tdesc_t *t = c->t;
    const int P = c->P, r = c->r, root = c->root, cls = c->cls;
    const size_t n = c->n;
    const int ip = c->inplace;
    const int in_place_here = ip && (!coll_is_rooted(c->coll) || r == root);
    MPI_Datatype dt = t->dt;
    MPI_Op op = c->op >= 0 ? ops[c->op].op : MPI_OP_NULL;
    buf_t sb, rb;
    int rc = MPI_SUCCESS, ok = 1, armed = 0;
    int *scounts = calloc((size_t) P, sizeof(int)), *sdispls = calloc((size_t) P, sizeof(int));
    int *rcounts = calloc((size_t) P, sizeof(int)), *rdispls = calloc((size_t) P, sizeof(int));
    int *swbytes = calloc((size_t) P, sizeof(int)), *rwbytes = calloc((size_t) P, sizeof(int));
    int *swcounts = calloc((size_t) P, sizeof(int)), *rwcounts = calloc((size_t) P, sizeof(int));
    MPI_Datatype *stypes = calloc((size_t) P, sizeof(MPI_Datatype));
    MPI_Datatype *rtypes = calloc((size_t) P, sizeof(MPI_Datatype));
    uint64_t *keys = calloc((size_t) P, sizeof(uint64_t));
    MPI_Datatype t2 = MPI_DATATYPE_NULL;
    mt_mem_t sk = mem_of(c, r, ROLE_SEND), rk = mem_of(c, r, ROLE_RECV);
    const size_t stride = n + 4; /* element index distance between blocks of one input stream */

    for (int k = 0; k < P; ++k) {
        keys[k] = key_of(c, k);
    }
    memset(&sb, 0, sizeof(sb));
    memset(&rb, 0, sizeof(rb));

    switch (c->coll) {
    case BARRIER:
        CALL(MPI_Barrier, MPI_Ibarrier, c->comm);
        break;

    case BCAST:
        buf_create(&rb, "buffer", t, n, rk);
        if (r == root) {
            buf_fill(&rb, 0, n, cls, keys[root], 0);
        }
        if (0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        CALL(MPI_Bcast, MPI_Ibcast, buf_ptr(&rb), (int) n, dt, root, c->comm);
        buf_expect_gen(&rb, 0, n, cls, keys[root], 0);
        break;

    case REDUCE:
    case ALLREDUCE:
    case SCAN:
    case EXSCAN: {
        int has_recv = REDUCE != c->coll || r == root;
        buf_create(&sb, "sendbuf", t, n, in_place_here ? MT_MEM_NONE : sk);
        buf_create(&rb, "recvbuf", t, n, has_recv ? rk : MT_MEM_NONE);
        buf_fill(&sb, 0, n, cls, keys[r], 0);
        if (in_place_here) {
            buf_fill(&rb, 0, n, cls, keys[r], 0);
        }
        if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        void *s = in_place_here ? MPI_IN_PLACE : buf_ptr(&sb);
        if (REDUCE == c->coll) {
            CALL(MPI_Reduce, MPI_Ireduce, s, buf_ptr(&rb), (int) n, dt, op, root, c->comm);
            if (r == root) {
                buf_expect_fold(&rb, 0, n, cls, c->op, keys, P, 0);
            }
        } else if (ALLREDUCE == c->coll) {
            CALL(MPI_Allreduce, MPI_Iallreduce, s, buf_ptr(&rb), (int) n, dt, op, c->comm);
            buf_expect_fold(&rb, 0, n, cls, c->op, keys, P, 0);
        } else if (SCAN == c->coll) {
            CALL(MPI_Scan, MPI_Iscan, s, buf_ptr(&rb), (int) n, dt, op, c->comm);
            buf_expect_fold(&rb, 0, n, cls, c->op, keys, r + 1, 0);
        } else {
            CALL(MPI_Exscan, MPI_Iexscan, s, buf_ptr(&rb), (int) n, dt, op, c->comm);
            if (r > 0) {
                buf_expect_fold(&rb, 0, n, cls, c->op, keys, r, 0);
            } else {
                buf_dontcare(&rb, 0, n); /* undefined on rank 0 */
            }
        }
        break;
    }

    case ALLGATHER:
    case GATHER: {
        int has_recv = ALLGATHER == c->coll || r == root;
        buf_create(&sb, "sendbuf", t, n, in_place_here ? MT_MEM_NONE : sk);
        buf_create(&rb, "recvbuf", t, (size_t) P * n, has_recv ? rk : MT_MEM_NONE);
        buf_fill(&sb, 0, n, cls, keys[r], 0);
        if (in_place_here) {
            buf_fill(&rb, (size_t) r * n, n, cls, keys[r], 0);
        }
        if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        if (ALLGATHER == c->coll) {
            if (in_place_here) {
                CALL(MPI_Allgather, MPI_Iallgather, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                     buf_ptr(&rb), (int) n, dt, c->comm);
            } else {
                CALL(MPI_Allgather, MPI_Iallgather, buf_ptr(&sb), (int) n, dt, buf_ptr(&rb),
                     (int) n, dt, c->comm);
            }
        } else {
            CALL(MPI_Gather, MPI_Igather, in_place_here ? MPI_IN_PLACE : buf_ptr(&sb), (int) n, dt,
                 buf_ptr(&rb), (int) n, dt, root, c->comm);
        }
        if (has_recv) {
            for (int k = 0; k < P; ++k) {
                buf_expect_gen(&rb, (size_t) k * n, n, cls, keys[k], 0);
            }
        }
        break;
    }

    case ALLGATHERV:
    case GATHERV: {
        int has_recv = ALLGATHERV == c->coll || r == root;
        size_t span;
        for (int k = 0; k < P; ++k) {
            rcounts[k] = vcount(n, k);
        }
        span = layout_blocks(P, rcounts, rdispls);
        buf_create(&sb, "sendbuf", t, (size_t) rcounts[r], in_place_here ? MT_MEM_NONE : sk);
        buf_create(&rb, "recvbuf", t, span, has_recv ? rk : MT_MEM_NONE);
        buf_fill(&sb, 0, (size_t) rcounts[r], cls, keys[r], 0);
        if (in_place_here) {
            buf_fill(&rb, (size_t) rdispls[r], (size_t) rcounts[r], cls, keys[r], 0);
        }
        if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        if (ALLGATHERV == c->coll) {
            if (in_place_here) {
                CALL(MPI_Allgatherv, MPI_Iallgatherv, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                     buf_ptr(&rb), rcounts, rdispls, dt, c->comm);
            } else {
                CALL(MPI_Allgatherv, MPI_Iallgatherv, buf_ptr(&sb), rcounts[r], dt, buf_ptr(&rb),
                     rcounts, rdispls, dt, c->comm);
            }
        } else {
            CALL(MPI_Gatherv, MPI_Igatherv, in_place_here ? MPI_IN_PLACE : buf_ptr(&sb), rcounts[r],
                 dt, buf_ptr(&rb), rcounts, rdispls, dt, root, c->comm);
        }
        if (has_recv) {
            for (int k = 0; k < P; ++k) {
                buf_expect_gen(&rb, (size_t) rdispls[k], (size_t) rcounts[k], cls, keys[k], 0);
            }
        }
        break;
    }

    case ALLTOALL:
        buf_create(&sb, "sendbuf", t, (size_t) P * n, in_place_here ? MT_MEM_NONE : sk);
        buf_create(&rb, "recvbuf", t, (size_t) P * n, rk);
        for (int j = 0; j < P; ++j) {
            buf_fill(in_place_here ? &rb : &sb, (size_t) j * n, n, cls, keys[r],
                     (size_t) j * stride);
        }
        if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        if (in_place_here) {
            CALL(MPI_Alltoall, MPI_Ialltoall, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf_ptr(&rb),
                 (int) n, dt, c->comm);
        } else {
            CALL(MPI_Alltoall, MPI_Ialltoall, buf_ptr(&sb), (int) n, dt, buf_ptr(&rb), (int) n, dt,
                 c->comm);
        }
        for (int k = 0; k < P; ++k) {
            buf_expect_gen(&rb, (size_t) k * n, n, cls, keys[k], (size_t) r * stride);
        }
        break;

    case ALLTOALLV:
    case ALLTOALLW: {
        size_t sspan, rspan;
        int w = ALLTOALLW == c->coll;
        for (int k = 0; k < P; ++k) {
            scounts[k] = a2a_count(n, r, k);
            rcounts[k] = a2a_count(n, k, r);
            if (w) { /* even, so that half of them can travel as pairs */
                scounts[k] += scounts[k] & 1;
                rcounts[k] += rcounts[k] & 1;
            }
        }
        sspan = layout_blocks(P, scounts, sdispls);
        rspan = layout_blocks(P, rcounts, rdispls);
        buf_create(&sb, "sendbuf", t, sspan, in_place_here ? MT_MEM_NONE : sk);
        buf_create(&rb, "recvbuf", t, rspan, rk);
        for (int j = 0; j < P; ++j) {
            /* in place: counts are symmetric, what goes to j sits where j's data lands */
            if (in_place_here) {
                buf_fill(&rb, (size_t) rdispls[j], (size_t) rcounts[j], cls, keys[r],
                         (size_t) j * stride);
            } else {
                buf_fill(&sb, (size_t) sdispls[j], (size_t) scounts[j], cls, keys[r],
                         (size_t) j * stride);
            }
        }
        if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        if (!w) {
            CALL(MPI_Alltoallv, MPI_Ialltoallv, in_place_here ? MPI_IN_PLACE : buf_ptr(&sb),
                 scounts, sdispls, dt, buf_ptr(&rb), rcounts, rdispls, dt, c->comm);
        } else {
            /* Odd peers get the data as pairs of elements on one side and single elements on
             * the other: same type signature, different types. */
            MPI_Type_contiguous(2, dt, &t2);
            MPI_Type_commit(&t2);
            for (int k = 0; k < P; ++k) {
                int spair = 1 == k % 2, rpair = 0 == k % 2 && k != r;
                stypes[k] = spair ? t2 : dt;
                swcounts[k] = spair ? scounts[k] / 2 : scounts[k];
                swbytes[k] = (int) (sdispls[k] * t->extent);
                rtypes[k] = rpair ? t2 : dt;
                rwcounts[k] = rpair ? rcounts[k] / 2 : rcounts[k];
                rwbytes[k] = (int) (rdispls[k] * t->extent);
            }
            CALL(MPI_Alltoallw, MPI_Ialltoallw, in_place_here ? MPI_IN_PLACE : buf_ptr(&sb),
                 swcounts, swbytes, stypes, buf_ptr(&rb), rwcounts, rwbytes, rtypes, c->comm);
        }
        for (int k = 0; k < P; ++k) {
            buf_expect_gen(&rb, (size_t) rdispls[k], (size_t) rcounts[k], cls, keys[k],
                           (size_t) r * stride);
        }
        break;
    }

    case SCATTER:
        buf_create(&sb, "sendbuf", t, (size_t) P * n, r == root ? sk : MT_MEM_NONE);
        buf_create(&rb, "recvbuf", t, n, in_place_here ? MT_MEM_NONE : rk);
        for (int k = 0; k < P; ++k) {
            buf_fill(&sb, (size_t) k * n, n, cls, keys[root], (size_t) k * stride);
        }
        if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        CALL(MPI_Scatter, MPI_Iscatter, buf_ptr(&sb), (int) n, dt,
             in_place_here ? MPI_IN_PLACE : buf_ptr(&rb), (int) n, dt, root, c->comm);
        if (!in_place_here) {
            buf_expect_gen(&rb, 0, n, cls, keys[root], (size_t) r * stride);
        }
        break;

    case SCATTERV: {
        size_t span;
        for (int k = 0; k < P; ++k) {
            scounts[k] = vcount(n, k);
        }
        span = layout_blocks(P, scounts, sdispls);
        buf_create(&sb, "sendbuf", t, span, r == root ? sk : MT_MEM_NONE);
        buf_create(&rb, "recvbuf", t, (size_t) scounts[r], in_place_here ? MT_MEM_NONE : rk);
        for (int k = 0; k < P; ++k) {
            buf_fill(&sb, (size_t) sdispls[k], (size_t) scounts[k], cls, keys[root],
                     (size_t) k * stride);
        }
        if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        CALL(MPI_Scatterv, MPI_Iscatterv, buf_ptr(&sb), scounts, sdispls, dt,
             in_place_here ? MPI_IN_PLACE : buf_ptr(&rb), scounts[r], dt, root, c->comm);
        if (!in_place_here) {
            buf_expect_gen(&rb, 0, (size_t) scounts[r], cls, keys[root], (size_t) r * stride);
        }
        break;
    }

    case REDUCE_SCATTER:
    case REDUCE_SCATTER_BLOCK: {
        size_t total = 0, off = 0;
        for (int k = 0; k < P; ++k) {
            rcounts[k] = REDUCE_SCATTER == c->coll ? vcount(n, k) : (int) n;
            if (k < r) {
                off += (size_t) rcounts[k];
            }
            total += (size_t) rcounts[k];
        }
        buf_create(&sb, "sendbuf", t, total, in_place_here ? MT_MEM_NONE : sk);
        buf_create(&rb, "recvbuf", t, in_place_here ? total : (size_t) rcounts[r], rk);
        buf_fill(in_place_here ? &rb : &sb, 0, total, cls, keys[r], 0);
        if (0 != buf_arm(&sb, diag) || 0 != buf_arm(&rb, diag)) {
            break;
        }
        armed = 1;
        void *s = in_place_here ? MPI_IN_PLACE : buf_ptr(&sb);
        if (REDUCE_SCATTER == c->coll) {
            CALL(MPI_Reduce_scatter, MPI_Ireduce_scatter, s, buf_ptr(&rb), rcounts, dt, op,
                 c->comm);
        } else {
            CALL(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, s, buf_ptr(&rb), (int) n, dt,
                 op, c->comm);
        }
        buf_expect_fold(&rb, 0, (size_t) rcounts[r], cls, c->op, keys, P, off);
        if (in_place_here) { /* past the result the in-place buffer is undefined */
            buf_dontcare(&rb, (size_t) rcounts[r], total - (size_t) rcounts[r]);
        }
        break;
    }
    default:
        abort();
    }

    if (MPI_SUCCESS != rc) {
        ok = 0;
    } else if (armed) {
        /* send buffers must come back unchanged, receive buffers as expected */
        ok &= buf_verify(&sb, diag);
        ok &= buf_verify(&rb, diag);
    } else if (BARRIER != c->coll) {
        ok = 0;
    }
    if (MPI_DATATYPE_NULL != t2) {
        MPI_Type_free(&t2);
    }
    buf_free(&sb);
    buf_free(&rb);
    free(scounts); free(sdispls); free(rcounts); free(rdispls);
    free(swbytes); free(rwbytes); free(swcounts); free(rwcounts);
    free(stypes); free(rtypes); free(keys);
    return ok;
}

/* Filter and counters -------------------------------------------------------------------- */

/* Alternatives separated by '|', each a glob (when it has * ? or [) or else a substring. */
static int name_matches(const char *patterns, const char *name)
{
    char one[256];
    const char *p = patterns;
    while (1) {
        size_t len = strcspn(p, "|");
        snprintf(one, sizeof(one), "%.*s", (int) len, p);
        if (one[0] && (NULL != strpbrk(one, "*?[") ? 0 == fnmatch(one, name, 0)
                                                  : NULL != strstr(name, one))) {
            return 1;
        }
        if ('\0' == p[len]) {
            return 0;
        }
        p += len + 1;
    }
}

static int name_selected(const char *name)
{
    if (NULL != exclude && '\0' != exclude[0] && name_matches(exclude, name)) {
        return 0;
    }
    return NULL == filter || '\0' == filter[0] || name_matches(filter, name);
}

static int cases_run = 0, cases_failed = 0;

static int nonblocking = 0; /* tcase() makes the nonblocking variant (case_t.nb) */
static int neighbor_topo = TP_RING; /* the topology of tcase()'s neighborhood collectives */

/* Which buffer-kind mixes to run (see the file header). */
enum { KINDS_UNIFORM = 1, KINDS_MIXED = 2, KINDS_ALL = 3 };
static int kinds_run = KINDS_ALL;
static int kinds_left_out = 0;

/* Do the ranks of this case's communicator pass different kinds of memory in one call? */
static int mode_mixes_kinds(int mode, int comm_id)
{
    return CM_SELF != comm_id && (M_MIXED == mode || M_ROOTDEV == mode || M_ROOTHOST == mode);
}

/* Whether the case named name runs now: the filter selects it, this run covers its kind of
 * buffers (else it counts as left out), and this is not a --list run (which prints it). */
static int case_runs(const char *name, int mode, int comm_id)
{
    if (!name_selected(name)) {
        return 0;
    }
    if (!(kinds_run & (mode_mixes_kinds(mode, comm_id) ? KINDS_MIXED : KINDS_UNIFORM))) {
        ++kinds_left_out;
        return 0;
    }
    if (list_only) {
        if (0 == mt_rank) {
            printf("%s\n", name);
        }
        return 0;
    }
    return 1;
}

/* Enumerate one case: run it on every rank (each in its own communicator), one TAP line. */
static void tcase(int coll, const tdesc_t *t, int op, size_t n, int mode, int comm_id,
                  int inplace, int root_sel)
{
    case_t c;
    char name[300], diag[MT_DIAG_LEN];
    int ok;

    memset(&c, 0, sizeof(c));
    c.coll = coll;
    c.t = t;
    c.op = op;
    c.n = n;
    c.mode = mode;
    c.comm_id = comm_id;
    c.inplace = inplace;
    c.root_sel = root_sel;
    c.nb = nonblocking;
    c.topo = neighbor_topo;
    c.key = mix64(seed ^ mix64(++case_counter));
    case_name(&c, name, sizeof(name));
    if (!case_runs(name, mode, comm_id)) {
        return;
    }
    c.comm = coll_is_neighbor(coll) ? topo_comms[c.topo] : comms[comm_id];
    MPI_Comm_size(c.comm, &c.P);
    MPI_Comm_rank(c.comm, &c.r);
    c.root = ROOT_0 == root_sel ? 0 : ROOT_MID == root_sel ? c.P / 2 : c.P - 1;
    c.cls = op >= 0 ? ops[op].cls : C_ANY;
    diag[0] = '\0';
    mt_set_case(name);
    ok = coll_is_neighbor(coll) ? run_neighbor_case(&c, diag) : run_case(&c, diag);
    ok = mt_check(ok, diag, "%s", name);
    ++cases_run;
    cases_failed += !ok;
}

/* ---- self-check: the comparison must see a planted error ----------------------------------- */

static void selfcheck(void)
{
    const tdesc_t *t = type_by_name("MPI_INT32_T"), *v = type_by_name("vec(int32)");
    const tdesc_t *ld = type_by_name("MPI_LONG_DOUBLE");
    buf_t b;
    char diag[MT_DIAG_LEN] = "";
    uint64_t key = 42;
    int caught;
    mt_set_case("self-check");

    /* A wrong value in the middle of a device buffer. */
    buf_create(&b, "recvbuf", t, 1023, MT_MEM_DEVICE);
    buf_fill(&b, 0, 1023, C_ANY, key, 0);
    buf_arm(&b, diag);
    buf_expect_gen(&b, 0, 1023, C_ANY, key, 0);
    caught = buf_verify(&b, diag); /* must match: same data */
    b.expect[b.origin + 17 * 4 + 2] ^= 0x10;
    diag[0] = '\0';
    caught = caught && !buf_verify(&b, diag) && NULL != strstr(diag, "element 17 ");
    mt_check(caught, diag, "self-check: a corrupted value in the reference is reported (%s)",
             caught ? "detected" : "MISSED");
    buf_free(&b);

    /* A write into a gap of a vector type, and into the guard behind the buffer. */
    buf_create(&b, "recvbuf", v, 5, MT_MEM_DEVICE);
    buf_fill(&b, 0, 5, C_ANY, key, 0);
    diag[0] = '\0';
    buf_arm(&b, diag);
    b.init[b.origin + 2 * (size_t) v->extent + 14] ^= 0xFF; /* a gap byte of element 2 */
    mt_mem_put(b.kind, b.live, b.init, b.bytes);
    caught = !buf_verify(&b, diag) && NULL != strstr(diag, "gap byte");
    b.init[b.origin + 2 * (size_t) v->extent + 14] ^= 0xFF;
    b.init[b.bytes - 1] = 0;
    mt_mem_put(b.kind, b.live, b.init, b.bytes);
    diag[0] = '\0';
    caught = caught && !buf_verify(&b, diag) && NULL != strstr(diag, "guard byte");
    mt_check(caught, diag,
             "self-check: writes into a type gap and past the buffer are reported (%s)",
             caught ? "detected" : "MISSED");
    buf_free(&b);

    /* Don't-care bytes (long double padding) do not count; their value bytes do. */
    buf_create(&b, "recvbuf", ld, 3, MT_MEM_HOST);
    buf_fill(&b, 0, 3, C_SUM, key, 0);
    diag[0] = '\0';
    buf_arm(&b, diag);
    buf_expect_gen(&b, 0, 3, C_SUM, key, 0);
    b.expect[b.origin + sizeof(long double) + sizeof(long double) - 1] ^= 1; /* padding */
    caught = LDBL_MANT_DIG != 64 || buf_verify(&b, diag);
    b.expect[b.origin + sizeof(long double) + 1] ^= 1; /* a mantissa byte */
    caught = caught && !buf_verify(&b, diag);
    mt_check(caught, diag, "self-check: padding is ignored, value bytes are not (%s)",
             caught ? "as designed" : "WRONG");
    buf_free(&b);
}

/* ---- setup --------------------------------------------------------------------------------- */

static MPI_Datatype derived(MPI_Datatype dt)
{
    MPI_Type_commit(&dt);
    return dt;
}

/* Open MPI 4.1.2 to 4.1.6 apply MPI_MIN/MPI_MAX to MPI_UNSIGNED_LONG as if it were signed
 * (open-mpi/ompi#10525, fixed on main by #10527).  Where the library has that bug, the test keeps
 * MPI_UNSIGNED_LONG values below 2^63, where signed and unsigned order agree: the type is still
 * covered, and coll/gpu is not blamed for its host fallback's bug. */
static int ulong_is_signed(void)
{
    unsigned long in = ULONG_MAX, inout = 1;
    MPI_Reduce_local(&in, &inout, 1, MPI_UNSIGNED_LONG, MPI_MIN);
    if (1 != inout) {
        tap_diag("this Open MPI orders MPI_UNSIGNED_LONG as signed in MPI_MIN/MPI_MAX "
                 "(open-mpi/ompi#10525): its values stay below 2^63");
        return 1;
    }
    return 0;
}

static int setup_types(void)
{
    int ok = 1;
    MPI_Datatype tmp, tmp2;
    tdesc_t *t;

    predef("MPI_INT8_T", MPI_INT8_T, K_I8, OPS_INT);
    predef("MPI_UINT8_T", MPI_UINT8_T, K_U8, OPS_INT);
    predef("MPI_INT16_T", MPI_INT16_T, K_I16, OPS_INT);
    predef("MPI_UINT16_T", MPI_UINT16_T, K_U16, OPS_INT);
    predef("MPI_INT32_T", MPI_INT32_T, K_I32, OPS_INT);
    predef("MPI_UINT32_T", MPI_UINT32_T, K_U32, OPS_INT | OPS_UPROD);
    predef("MPI_INT64_T", MPI_INT64_T, K_I64, OPS_INT);
    predef("MPI_UINT64_T", MPI_UINT64_T, K_U64, OPS_INT);
    predef("MPI_INT", MPI_INT, K_I32, OPS_INT);
    predef("MPI_UNSIGNED", MPI_UNSIGNED, K_U32, OPS_INT);
    predef("MPI_LONG", MPI_LONG, sizeof(long) == 8 ? K_I64 : K_I32, OPS_INT);
    predef("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG,
           sizeof(long) != 8 ? K_U32 : ulong_is_signed() ? K_U63 : K_U64, OPS_INT);
    predef("MPI_LONG_LONG", MPI_LONG_LONG, K_I64, OPS_INT);
    predef("MPI_SHORT", MPI_SHORT, K_I16, OPS_INT);
    predef("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, K_U16, OPS_INT);
    predef("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, K_I8, OPS_INT);
    predef("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, K_U8, OPS_INT);
    predef("MPI_CHAR", MPI_CHAR, K_I8, 0); /* not a reduction type in MPI */
    predef("MPI_BYTE", MPI_BYTE, K_U8, OPS_BYTE);
    predef("MPI_C_BOOL", MPI_C_BOOL, K_BOOL, OPS_BOOL);
    predef("MPI_FLOAT", MPI_FLOAT, K_F32, OPS_FLOAT);
    predef("MPI_DOUBLE", MPI_DOUBLE, K_F64, OPS_FLOAT);
    predef("MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, K_LD, OPS_FLOAT);
    predef("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, K_CF32, OPS_COMPLEX);
    predef("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, K_CF64, OPS_COMPLEX);
    predef("MPI_FLOAT_INT", MPI_FLOAT_INT, K_FLOAT_INT, OPS_LOC);
    predef("MPI_DOUBLE_INT", MPI_DOUBLE_INT, K_DOUBLE_INT, OPS_LOC);
    predef("MPI_LONG_INT", MPI_LONG_INT, K_LONG_INT, OPS_LOC);
    predef("MPI_2INT", MPI_2INT, K_2INT, OPS_LOC);
    predef("MPI_SHORT_INT", MPI_SHORT_INT, K_SHORT_INT, OPS_LOC);

    /* vector: 2 blocks of 3 int32, stride 5, resized to 40 bytes: gaps inside and between */
    MPI_Type_vector(2, 3, 5, MPI_INT32_T, &tmp);
    MPI_Type_create_resized(tmp, 0, 40, &tmp2);
    MPI_Type_free(&tmp);
    t = type_add("vec(int32)", derived(tmp2), OPS_UPROD, 1);
    for (int i = 0; i < 6; ++i) {
        type_slot(t, K_I32, (i / 3) * 20 + (i % 3) * 4);
    }

    /* struct {int32 @4; double @16} resized to lb 4, extent 32: a positive lower bound */
    {
        int bl[2] = {1, 1};
        MPI_Aint disp[2] = {4, 16};
        MPI_Datatype ty[2] = {MPI_INT32_T, MPI_DOUBLE};
        MPI_Type_create_struct(2, bl, disp, ty, &tmp);
        MPI_Type_create_resized(tmp, 4, 32, &tmp2);
        MPI_Type_free(&tmp);
        t = type_add("struct(lb=+4)", derived(tmp2), 0, 1);
        type_slot(t, K_I32, 4);
        type_slot(t, K_F64, 16);
    }
    /* struct {int32 @-12; double @0} resized to lb -16, extent 32: data before the pointer */
    {
        int bl[2] = {1, 1};
        MPI_Aint disp[2] = {-12, 0};
        MPI_Datatype ty[2] = {MPI_INT32_T, MPI_DOUBLE};
        MPI_Type_create_struct(2, bl, disp, ty, &tmp);
        MPI_Type_create_resized(tmp, -16, 32, &tmp2);
        MPI_Type_free(&tmp);
        t = type_add("struct(lb=-16)", derived(tmp2), 0, 1);
        type_slot(t, K_I32, -12);
        type_slot(t, K_F64, 0);
    }
    /* vector of uint32 (3 blocks of 1, stride 2) resized to 24 bytes, for the user ops */
    MPI_Type_vector(3, 1, 2, MPI_UINT32_T, &tmp);
    MPI_Type_create_resized(tmp, 0, 24, &tmp2);
    MPI_Type_free(&tmp);
    t = type_add("vec(uint32)", derived(tmp2), OPS_UPROD, 1);
    type_slot(t, K_U32, 0);
    type_slot(t, K_U32, 8);
    type_slot(t, K_U32, 16);
    /* uint32 @-8 and @4, resized to lb -12, extent 20: negative lower bound, reducible */
    {
        int bl[2] = {1, 1};
        MPI_Aint disp[2] = {-8, 4};
        MPI_Datatype ty[2] = {MPI_UINT32_T, MPI_UINT32_T};
        MPI_Type_create_struct(2, bl, disp, ty, &tmp);
        MPI_Type_create_resized(tmp, -12, 20, &tmp2);
        MPI_Type_free(&tmp);
        t = type_add("struct(uint32,lb=-12)", derived(tmp2), OPS_UPROD, 1);
        type_slot(t, K_U32, -8);
        type_slot(t, K_U32, 4);
    }
    /* the affine element: contiguous pair of uint32 */
    MPI_Type_contiguous(2, MPI_UINT32_T, &tmp);
    t = type_add("affine(2xuint32)", derived(tmp), OPS_AFF, 1);
    type_slot(t, K_AFF, 0);
    /* vector of affine elements (2 blocks of 1, stride 2): a gap between them */
    MPI_Type_vector(2, 1, 2, t->dt, &tmp);
    t = type_add("vec(affine)", derived(tmp), OPS_AFF, 1);
    type_slot(t, K_AFF, 0);
    type_slot(t, K_AFF, 16);

    for (int i = 0; i < ntypes; ++i) {
        ok &= type_finish(&types[i]);
    }
    return ok;
}

static void setup_ops(void)
{
    ops[O_SUM].op = MPI_SUM;
    ops[O_PROD].op = MPI_PROD;
    ops[O_MIN].op = MPI_MIN;
    ops[O_MAX].op = MPI_MAX;
    ops[O_LAND].op = MPI_LAND;
    ops[O_LOR].op = MPI_LOR;
    ops[O_LXOR].op = MPI_LXOR;
    ops[O_BAND].op = MPI_BAND;
    ops[O_BOR].op = MPI_BOR;
    ops[O_BXOR].op = MPI_BXOR;
    ops[O_MINLOC].op = MPI_MINLOC;
    ops[O_MAXLOC].op = MPI_MAXLOC;
    MPI_Op_create(user_uprod, 1, &ops[O_UPROD].op);
    MPI_Op_create(user_aff, 0, &ops[O_AFF].op);
}

static void setup_comms(void)
{
    comms[CM_WORLD] = MPI_COMM_WORLD;
    /* odd/even, keys reversed so that communicator rank order differs from world order */
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_size - mt_rank, &comms[CM_SPLIT]);
    /* all but the last rank (3 of 4: not a power of two) and the last one alone */
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank == mt_size - 1, mt_rank, &comms[CM_UNEVEN]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[CM_DUP]);
    comms[CM_SELF] = MPI_COMM_SELF;
    for (int i = 0; i < NCOMM; ++i) {
        MPI_Comm_set_errhandler(comms[i], MPI_ERRORS_RETURN);
    }
    /* COLL_GPU_TEST_WARM_TEAMS: a blocking device allreduce on every communicator first, as
     * programs make one before their nonblocking calls; coll/gpu's node teams are then set up
     * and known ready on every rank, and the nonblocking collectives that need that take them
     * (composed_team.sh) */
    if (NULL != getenv("COLL_GPU_TEST_WARM_TEAMS")) {
        int *d = mt_mem_alloc(MT_MEM_DEVICE, sizeof(int));
        for (int i = 0; i < NCOMM && NULL != d; ++i) {
            (void) MPI_Allreduce(MPI_IN_PLACE, d, 1, MPI_INT, MPI_SUM, comms[i]);
        }
        mt_mem_free(MT_MEM_DEVICE, d);
    }
}

/* ---- the matrix ------------------------------------------------------------------------------ */

static const int reductions[] = {ALLREDUCE, REDUCE, REDUCE_SCATTER_BLOCK, REDUCE_SCATTER, SCAN,
                                 EXSCAN};
static const int movers[] = {BCAST, ALLGATHER, ALLGATHERV, ALLTOALL, ALLTOALLV, ALLTOALLW,
                             GATHER, GATHERV, SCATTER, SCATTERV};
#define NRED ((int) (sizeof(reductions) / sizeof(reductions[0])))
#define NMOV ((int) (sizeof(movers) / sizeof(movers[0])))

static int quick = 0;

/* Every predefined type with every predefined op valid for it, every reduction collective;
 * every type (derived ones too) through every data-movement collective. */
static void section_types(void)
{
    for (int i = 0; i < ntypes; ++i) {
        const tdesc_t *t = &types[i];
        if (t->derived) {
            continue;
        }
        for (int op = 0; op <= O_MAXLOC; ++op) {
            if (!(t->ops & (1u << op))) {
                continue;
            }
            for (int j = 0; j < NRED; ++j) {
                tcase(reductions[j], t, op, 7, M_DEV, CM_WORLD, 0, ROOT_LAST);
            }
            if (quick) {
                continue;
            }
            tcase(ALLREDUCE, t, op, 4099, M_DEV, CM_WORLD, 0, ROOT_LAST);
            tcase(ALLREDUCE, t, op, 1023, M_MIXED, CM_WORLD, 0, ROOT_LAST);
            tcase(REDUCE, t, op, 1023, M_ROOTHOST, CM_WORLD, 0, ROOT_0);
            tcase(SCAN, t, op, 1023, M_DEV, CM_SPLIT, 1, ROOT_LAST);
        }
    }
    for (int i = 0; i < ntypes; ++i) {
        for (int j = 0; j < NMOV; ++j) {
            tcase(movers[j], &types[i], -1, 7, M_DEV, CM_WORLD, 0, ROOT_LAST);
            if (!quick) {
                tcase(movers[j], &types[i], -1, 1023, M_MIXED, CM_WORLD, 0, ROOT_0);
            }
        }
    }
}

/* User-defined ops (commutative and not) on predefined and derived types, every reduction.
 * A type with a negative true lower bound is kept to counts that Open MPI's tuned module
 * reduces without its ring algorithm: the ring allocates its segment buffers without room for
 * the part before the lower bound and writes outside them (heap corruption, seen with stock
 * Open MPI 4.1.4 on host buffers, 2 ranks, 1023 elements of 20 bytes), and coll/gpu's staging
 * falls back to that same algorithm. */
static void section_user(void)
{
    for (int i = 0; i < ntypes; ++i) {
        const tdesc_t *t = &types[i];
        size_t mid = t->true_lb < 0 ? 100 : 1023;
        for (int op = O_UPROD; op <= O_AFF; ++op) {
            if (!(t->ops & (1u << op))) {
                continue;
            }
            for (int j = 0; j < NRED; ++j) {
                tcase(reductions[j], t, op, 7, M_DEV, CM_WORLD, 0, ROOT_LAST);
                if (quick) {
                    continue;
                }
                tcase(reductions[j], t, op, mid, M_MIXED, CM_WORLD, 0, ROOT_0);
                tcase(reductions[j], t, op, mid, M_DEV, CM_SPLIT, 1, ROOT_MID);
            }
        }
    }
    /* last: the uneven split has a 1-rank group, where a crash would hide what follows */
    for (int i = 0; i < ntypes && !quick; ++i) {
        for (int op = O_UPROD; op <= O_AFF; ++op) {
            if (types[i].ops & (1u << op)) {
                for (int j = 0; j < NRED; ++j) {
                    tcase(reductions[j], &types[i], op, 100, M_HOST, CM_UNEVEN, 1, ROOT_LAST);
                }
            }
        }
    }
}

/* Derived types through the data-movement collectives in more modes and communicators. */
static void section_derived(void)
{
    static const int modes[] = {M_HOST, M_ROOTDEV, M_SDEV};
    for (int i = 0; i < ntypes; ++i) {
        if (!types[i].derived) {
            continue;
        }
        for (int j = 0; j < NMOV; ++j) {
            for (int m = 0; m < 3; ++m) {
                if (quick && m > 0) {
                    break;
                }
                tcase(movers[j], &types[i], -1, 65, modes[m], m == 1 ? CM_SPLIT : CM_WORLD,
                      m == 0 && coll_has_inplace(movers[j]), ROOT_0);
            }
        }
    }
}

/* Counts of ~bytes target: 0, 1, odd, around the staging pipeline's chunk boundaries (1 MiB,
 * 4 MiB), ~8 MiB.  Every collective, in two type/op/mode combinations. */
static void section_sizes(void)
{
    static const struct {
        size_t bytes;
        long delta;
    } sizes[] = {
        {0, 0}, {0, 1}, {0, 7}, {0, 1023}, {0, 4099}, {0, 65537},
        {1 << 20, -1}, {1 << 20, 0}, {1 << 20, 1}, {1 << 20, 37},
        {4 << 20, -1}, {4 << 20, 0}, {4 << 20, 1}, {8 << 20, 3},
    };
    static const struct {
        const char *type;
        int op;
        int mode;
    } combos[] = {
        {"MPI_INT32_T", O_SUM, M_DEV},
        {"MPI_UINT8_T", O_BXOR, M_MIXED}, /* odd byte counts */
    };
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        for (size_t k = 0; k < sizeof(combos) / sizeof(combos[0]); ++k) {
            const tdesc_t *t = type_by_name(combos[k].type);
            size_t n = sizes[s].bytes / (size_t) t->extent + (size_t) sizes[s].delta;
            if (quick && sizes[s].bytes > (1 << 20)) {
                continue;
            }
            /* the big mixed cases only at the chunk sizes themselves */
            if (k > 0 && sizes[s].bytes > 0 && (1 == sizes[s].delta || -1 == sizes[s].delta)) {
                continue;
            }
            for (int c = 0; c < NCOLL; ++c) {
                if (BARRIER == c) {
                    continue;
                }
                tcase(c, t, coll_is_reduction(c) ? combos[k].op : -1, n, combos[k].mode,
                      CM_WORLD, 0, 0 == s % 2 ? ROOT_LAST : ROOT_0);
            }
            if (0 == k) {
                /* the device fast paths (one-shot and two-shot allreduce, push bcast) in place
                 * and on 2 ranks, where a count splits unevenly over the ranks */
                tcase(ALLREDUCE, t, combos[k].op, n, M_DEV, CM_WORLD, 1, ROOT_LAST);
                tcase(ALLREDUCE, t, combos[k].op, n, M_DEV, CM_SPLIT, 0, ROOT_LAST);
                tcase(BCAST, t, -1, n, M_DEV, CM_SPLIT, 0, 0 == s % 2 ? ROOT_0 : ROOT_LAST);
            }
        }
    }
}

/* Every collective x buffer mode x in-place x communicator; roots varied for rooted ones. */
static void section_modes(void)
{
    /* communicators with a 1-rank group last: a crash there would hide the others */
    static const int order[NCOMM] = {CM_WORLD, CM_SPLIT, CM_DUP, CM_UNEVEN, CM_SELF};
    for (int oi = 0; oi < NCOMM; ++oi) {
        const int cm = order[oi];
        const tdesc_t *t = type_by_name(cm == CM_SPLIT || cm == CM_UNEVEN ? "MPI_DOUBLE"
                                                                          : "MPI_INT32_T");
        int op = cm == CM_SPLIT || cm == CM_UNEVEN ? O_MAX : O_SUM;
        tcase(BARRIER, t, -1, 0, M_HOST, cm, 0, ROOT_LAST);
        for (int c = 0; c < NCOLL; ++c) {
            if (BARRIER == c) {
                continue;
            }
            for (int m = 0; m < NMODE; ++m) {
                for (int ip = 0; ip <= (int) coll_has_inplace(c); ++ip) {
                    /* in place there is one buffer: send/recv kinds make no difference */
                    if (ip && (M_SDEV == m || M_RDEV == m)) {
                        continue;
                    }
                    if (quick && cm != CM_WORLD && cm != CM_SPLIT && m > M_MIXED) {
                        continue;
                    }
                    tcase(c, t, coll_is_reduction(c) ? op : -1, 1023, m, cm, ip,
                          (m + ip) % 3 == 0 ? ROOT_LAST : (m + ip) % 3 == 1 ? ROOT_0 : ROOT_MID);
                }
            }
        }
    }
}

/* Several nonblocking collectives on the same communicator in flight at once, completed
 * together: two MPI_Iallreduce (one in place), an MPI_Ibcast and an MPI_Iallgather, each on
 * buffers of the mode's kind, then MPI_Waitall (how 0) or MPI_Testall polled (how 1).  Each
 * call needs bounce memory of its own until its request completes. */
static void nb_outstanding(int mode, int how)
{
    enum { NREQ = 4, NA = 1000, NB = 333, NC = 777, ND = 100 };
    char name[200], diag[MT_DIAG_LEN] = "";
    const char *how_name = 0 == how ? "MPI_Waitall" : "MPI_Testall-polled";
    MPI_Comm comm = MPI_COMM_WORLD;
    int P, r, root, ok = 1, rc;
    case_t c;
    MPI_Request req[NREQ];
    mt_mem_t kind;
    size_t bytes[5];
    int32_t *host[5], *want[5];
    void *buf[5];

    snprintf(name, sizeof(name), "nonblocking: iallreduce + iallreduce in-place + ibcast + "
             "iallgather outstanding at once, %s, %s", mode_names[mode], how_name);
    if (!case_runs(name, mode, CM_WORLD)) {
        return;
    }
    mt_set_case(name);
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &r);
    root = P - 1;
    memset(&c, 0, sizeof(c));
    c.mode = mode;
    c.root = root;
    kind = mem_of(&c, r, ROLE_RECV);
    /* 0: allreduce send, 1: allreduce receive, 2: in-place allreduce, 3: bcast, 4: allgather
     * receive (its send buffer is the first ND elements of buffer 0) */
    bytes[0] = NA * sizeof(int32_t);
    bytes[1] = NA * sizeof(int32_t);
    bytes[2] = NB * sizeof(int32_t);
    bytes[3] = NC * sizeof(int32_t);
    bytes[4] = (size_t) P * ND * sizeof(int32_t);
    for (int k = 0; k < 5; ++k) {
        host[k] = malloc(bytes[k]);
        want[k] = malloc(bytes[k]);
        buf[k] = mt_mem_alloc(kind, bytes[k]);
        memset(host[k], POISON, bytes[k]);
    }
    for (int i = 0; i < NA; ++i) {
        host[0][i] = (int32_t) (r * 1000 + i + 1);
        want[0][i] = host[0][i];
        want[1][i] = (int32_t) (1000 * P * (P - 1) / 2 + P * (i + 1));
    }
    for (int i = 0; i < NB; ++i) {
        host[2][i] = (int32_t) ((r + 1) * (3 * i + 7));
        want[2][i] = (int32_t) ((3 * i + 7) * P * (P + 1) / 2);
    }
    for (int i = 0; i < NC; ++i) {
        want[3][i] = (int32_t) (13 * i + 5);
        if (r == root) {
            host[3][i] = want[3][i];
        }
    }
    for (int k = 0; k < P; ++k) {
        for (int i = 0; i < ND; ++i) {
            want[4][k * ND + i] = (int32_t) (k * 1000 + i + 1); /* = rank k's buffer 0 */
        }
    }
    for (int k = 0; k < 5; ++k) {
        if (NULL == buf[k] || NULL == host[k] || NULL == want[k] ||
            0 != mt_mem_put(kind, buf[k], host[k], bytes[k])) {
            mt_diag_add(diag, "could not set up buffer %d; ", k);
            ok = 0;
        }
    }
    if (ok) {
        rc = MPI_Iallreduce(buf[0], buf[1], NA, MPI_INT32_T, MPI_SUM, comm, &req[0]);
        rc = MPI_SUCCESS != rc ? rc
             : MPI_Iallreduce(MPI_IN_PLACE, buf[2], NB, MPI_INT32_T, MPI_SUM, comm, &req[1]);
        rc = MPI_SUCCESS != rc ? rc : MPI_Ibcast(buf[3], NC, MPI_INT32_T, root, comm, &req[2]);
        rc = MPI_SUCCESS != rc ? rc
             : MPI_Iallgather(buf[0], ND, MPI_INT32_T, buf[4], ND, MPI_INT32_T, comm, &req[3]);
        if (MPI_SUCCESS == rc && 0 == how) {
            rc = MPI_Waitall(NREQ, req, MPI_STATUSES_IGNORE);
        } else if (MPI_SUCCESS == rc) {
            int done = 0;
            while (MPI_SUCCESS == rc && !done) {
                rc = MPI_Testall(NREQ, req, &done, MPI_STATUSES_IGNORE);
            }
        }
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "a call returned %d: %s; ", rc, mt_mpi_error(rc));
            ok = 0;
        }
    }
    for (int k = 0; ok && k < 5; ++k) {
        if (0 != mt_mem_get(kind, host[k], buf[k], bytes[k])) {
            mt_diag_add(diag, "could not read buffer %d back; ", k);
            ok = 0;
            break;
        }
        for (size_t i = 0; i < bytes[k] / sizeof(int32_t); ++i) {
            if (host[k][i] != want[k][i]) {
                mt_diag_add(diag, "buffer %d element %zu: expected %d, got %d; ", k, i,
                            (int) want[k][i], (int) host[k][i]);
                ok = 0;
                break;
            }
        }
    }
    for (int k = 0; k < 5; ++k) {
        mt_mem_free(kind, buf[k]);
        free(host[k]);
        free(want[k]);
    }
    ok = mt_check(ok, diag, "%s", name);
    ++cases_run;
    cases_failed += !ok;
}

/* Not run by default (coll_nonblocking.sh runs it): the nonblocking twins of every collective
 * (MPI_Iallreduce ... + MPI_Wait) in every buffer mode, in place where MPI allows it, on several
 * communicators; MPI_Test polling; derived types; several requests in flight at once. */
static void section_nonblocking(void)
{
    static const int comm_order[] = {CM_WORLD, CM_SPLIT, CM_SELF};
    const tdesc_t *t = type_by_name("MPI_INT32_T");
    int nb_left_out = 0;

    nonblocking = 1;
    for (size_t ci = 0; ci < sizeof(comm_order) / sizeof(comm_order[0]); ++ci) {
        const int cm = comm_order[ci];
        for (int c = 0; c < NCOLL; ++c) {
            for (int m = 0; m < NMODE; ++m) {
                if (CM_WORLD != cm && m > M_MIXED) {
                    continue;
                }
                for (int ip = 0; ip <= (int) coll_has_inplace(c); ++ip) {
                    if (ip && (M_SDEV == m || M_RDEV == m)) {
                        continue;
                    }
                    /* coll/libnbc 4.1 gets in-place MPI_Ialltoallv/w wrong on host buffers */
                    if (ip && (ALLTOALLV == c || ALLTOALLW == c)) {
                        ++nb_left_out;
                        continue;
                    }
                    tcase(c, t, coll_is_reduction(c) ? O_SUM : -1, BARRIER == c ? 0 : 1023, m,
                          cm, ip,
                          (m + ip) % 3 == 0 ? ROOT_LAST : (m + ip) % 3 == 1 ? ROOT_0 : ROOT_MID);
                    if (BARRIER == c) {
                        break;
                    }
                }
                if (BARRIER == c) {
                    break;
                }
            }
        }
    }
    /* MPI_Test polling to completion */
    nonblocking = 2;
    for (int c = 0; c < NCOLL; ++c) {
        if (BARRIER != c) {
            tcase(c, t, coll_is_reduction(c) ? O_SUM : -1, 4099, M_DEV, CM_WORLD, 0, ROOT_0);
        }
    }
    /* derived and non-contiguous types (gaps must come back unchanged) */
    nonblocking = 1;
    for (int i = 0; i < ntypes; ++i) {
        if (!types[i].derived) {
            continue;
        }
        for (int j = 0; j < NMOV; ++j) {
            tcase(movers[j], &types[i], -1, 65, M_DEV, CM_WORLD,
                  coll_has_inplace(movers[j]) && 0 == i % 2, ROOT_MID);
        }
        for (int j = 0; j < NRED; ++j) {
            /* coll/libnbc 4.1's MPI_Ireduce corrupts its heap on a type with a negative lower
             * bound, on host buffers too */
            if (REDUCE == reductions[j] && types[i].true_lb < 0) {
                ++nb_left_out;
                continue;
            }
            for (int op = 0; op < O_COUNT; ++op) {
                if (types[i].ops & (1u << op)) {
                    tcase(reductions[j], &types[i], op, 65, M_HOST, CM_WORLD, 0, ROOT_0);
                    tcase(reductions[j], &types[i], op, 65, M_DEV, CM_WORLD, 0, ROOT_0);
                    break;
                }
            }
        }
    }
    nonblocking = 0;
    if (nb_left_out > 0 && !list_only) {
        tap_diag("%d cases left out that coll/libnbc of Open MPI 4.1 gets wrong on host buffers "
                 "too: MPI_Ialltoallv/w in place, MPI_Ireduce of a type with a negative lower "
                 "bound", nb_left_out);
    }
    /* several requests in flight at once */
    for (int how = 0; how < 2; ++how) {
        nb_outstanding(M_DEV, how);
        nb_outstanding(M_MIXED, how);
        nb_outstanding(M_HOST, how);
    }
}

/* The topologies of the neighbor section, with the world's ranks (no reordering). */
static void setup_topologies(void)
{
    int dims1[1] = {mt_size}, periods1[1] = {1};
    int dims2[2] = {0, 0}, periods2[2] = {0, 0};
    int in[64], out[64], weights[64], indeg, outdeg;

    MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, periods1, 0, &topo_comms[TP_RING]);
    MPI_Dims_create(mt_size, 2, dims2);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, periods2, 0, &topo_comms[TP_GRID]);
    indeg = graph_list(mt_size, mt_rank, 0, in);
    outdeg = graph_list(mt_size, mt_rank, 1, out);
    /* unit weights: GCC takes Open MPI's MPI_UNWEIGHTED for an array of size 0 */
    for (int i = 0; i < 64; ++i) {
        weights[i] = 1;
    }
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, indeg, in, weights, outdeg, out, weights,
                                   MPI_INFO_NULL, 0, &topo_comms[TP_GRAPH]);
    for (int i = 0; i < NTOPO; ++i) {
        MPI_Comm_set_errhandler(topo_comms[i], MPI_ERRORS_RETURN);
    }
}

/* Not run by default (coll_neighbor.sh runs it): the five neighborhood collectives and their
 * nonblocking twins on a periodic ring, a non-periodic grid (MPI_PROC_NULL neighbours: their
 * receive blocks stay untouched) and a distributed graph whose ranks have different in- and
 * out-degrees; every buffer mode, counts 0, 1 and 1023, a predefined and a derived type. */
static void section_neighbor(void)
{
    static const int modes[] = {M_HOST, M_DEV, M_MIXED, M_SDEV, M_RDEV};
    static const size_t counts[] = {0, 1, 1023};
    const tdesc_t *plain = type_by_name("MPI_INT32_T"), *vec = type_by_name("vec(int32)");
    const tdesc_t *neg = type_by_name("struct(lb=-16)");

    int nbr_left_out = 0;

    if (!list_only) {
        setup_topologies();
    }
    for (int tp = 0; tp < NTOPO; ++tp) {
        neighbor_topo = tp;
        for (int nb = 0; nb <= 1; ++nb) {
            nonblocking = nb;
            for (int c = NCOLL; c < NCOLL_ALL; ++c) {
                /* coll/libnbc 4.1's MPI_Ineighbor_alltoall(v,w) mixes up the blocks when both
                 * neighbours of a periodic ring are the same rank (2 ranks), on host buffers too */
                if (nb && TP_RING == tp && 2 == mt_size && NBR_ALLTOALL <= c) {
                    ++nbr_left_out;
                    continue;
                }
                for (size_t mi = 0; mi < sizeof(modes) / sizeof(modes[0]); ++mi) {
                    for (size_t ni = 0; ni < sizeof(counts) / sizeof(counts[0]); ++ni) {
                        tcase(c, plain, -1, counts[ni], modes[mi], CM_WORLD, 0, ROOT_0);
                    }
                    /* derived: gaps inside and between the elements must come back */
                    if (M_SDEV != modes[mi] && M_RDEV != modes[mi]) {
                        tcase(c, vec, -1, 1023, modes[mi], CM_WORLD, 0, ROOT_0);
                    }
                }
                tcase(c, vec, -1, 1, M_DEV, CM_WORLD, 0, ROOT_0);
                tcase(c, neg, -1, 65, M_DEV, CM_WORLD, 0, ROOT_0);
            }
        }
        /* MPI_Test polling to completion */
        nonblocking = 2;
        for (int c = NCOLL; c < NCOLL_ALL; ++c) {
            if (TP_RING == tp && 2 == mt_size && NBR_ALLTOALL <= c) {
                ++nbr_left_out;
                continue;
            }
            tcase(c, plain, -1, 4099, M_DEV, CM_WORLD, 0, ROOT_0);
        }
    }
    nonblocking = 0;
    neighbor_topo = TP_RING;
    if (nbr_left_out > 0 && !list_only) {
        tap_diag("%d groups of cases left out that coll/libnbc of Open MPI 4.1 gets wrong on host "
                 "buffers too: MPI_Ineighbor_alltoall(v,w) on a 2-rank periodic ring",
                 nbr_left_out);
    }
    for (int i = 0; !list_only && i < NTOPO; ++i) {
        MPI_Comm_free(&topo_comms[i]);
    }
}

int main(int argc, char **argv)
{
    const char *sections = "selfcheck,types,user,derived,modes,sizes";
    const char *kinds_arg = "auto";
    const char *s;
    char why[300];
    double t0;

    mt_init(&argc, &argv);
    for (int i = 1; i < argc; ++i) {
        if (0 == strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (0 == strncmp(argv[i], "--sections=", 11)) {
            sections = argv[i] + 11;
        } else if (0 == strcmp(argv[i], "--list")) {
            list_only = 1;
        } else if (0 == strncmp(argv[i], "--kinds=", 8)) {
            kinds_arg = argv[i] + 8;
        } else {
            if (0 == mt_rank) {
                fprintf(stderr, "usage: %s [--quick] [--sections=LIST] [--list] "
                        "[--kinds=auto|uniform|mixed|all]\n", argv[0]);
            }
            MPI_Finalize();
            return TAP_HARD_ERROR_EXIT;
        }
    }
    if (NULL != (s = getenv("COLL_GPU_TEST_SEED")) && s[0]) {
        seed = strtoull(s, NULL, 0);
    }
    filter = getenv("COLL_GPU_TEST_FILTER");
    exclude = getenv("COLL_GPU_TEST_EXCLUDE");
    if (0 == strcmp(kinds_arg, "auto")) {
        /* coll/gpu's default is true: uniform kinds assumed */
        const char *u = getenv("OMPI_MCA_coll_gpu_uniform_buffers");
        int uniform = NULL == u || !(0 == strcmp(u, "0") || 0 == strcasecmp(u, "false") ||
                                     0 == strcasecmp(u, "no") || 0 == strcasecmp(u, "f"));
        kinds_run = uniform ? KINDS_UNIFORM : KINDS_ALL;
    } else if (0 == strcmp(kinds_arg, "uniform")) {
        kinds_run = KINDS_UNIFORM;
    } else if (0 == strcmp(kinds_arg, "mixed")) {
        kinds_run = KINDS_MIXED;
    } else {
        kinds_run = KINDS_ALL;
    }

    if (!list_only && !mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    setup_ops();
    setup_comms();
    if (!setup_types()) {
        if (0 == mt_rank) {
            printf("Bail out! the datatypes do not have the layout this test assumes\n");
        }
        MPI_Abort(MPI_COMM_WORLD, TAP_HARD_ERROR_EXIT);
    }
    if (!list_only) {
        tap_diag("%d ranks, device %s, seed %llu%s%s%s%s%s", mt_size, mt_device_name(),
                 (unsigned long long) seed, quick ? ", quick" : "", filter ? ", filter " : "",
                 filter ? filter : "", exclude ? ", exclude " : "", exclude ? exclude : "");
    }

#define SECTION(name, fn)                                                                  \
    if (NULL != strstr(sections, name)) {                                                  \
        int before = cases_run;                                                            \
        t0 = MPI_Wtime();                                                                  \
        fn();                                                                              \
        if (!list_only) {                                                                  \
            tap_diag("section %s: %d cases in %.1f s", name, cases_run - before,           \
                     MPI_Wtime() - t0);                                                    \
        }                                                                                  \
    }
    if (!list_only && NULL != strstr(sections, "selfcheck") &&
        (NULL == filter || NULL != strstr("self-check", filter))) {
        selfcheck();
    }
    SECTION("types", section_types);
    SECTION("user", section_user);
    SECTION("derived", section_derived);
    SECTION("modes", section_modes);
    SECTION("sizes", section_sizes);
    SECTION("nonblocking", section_nonblocking);
    SECTION("neighbor", section_neighbor);
#undef SECTION

    for (int i = 0; i < NCOMM; ++i) {
        if (CM_SPLIT == i || CM_UNEVEN == i || CM_DUP == i) {
            MPI_Comm_free(&comms[i]);
        }
    }
    for (int i = 0; i < ntypes; ++i) {
        if (types[i].derived) {
            MPI_Type_free(&types[i].dt);
        }
    }
    MPI_Op_free(&ops[O_UPROD].op);
    MPI_Op_free(&ops[O_AFF].op);
    free(scratch_a);
    free(scratch_b);
    pool_release();
    if (list_only) {
        MPI_Finalize();
        return 0;
    }
    if (kinds_left_out > 0) {
        tap_diag("%d cases %s left out (--kinds; coll_gpu_uniform_buffers)", kinds_left_out,
                 KINDS_UNIFORM == kinds_run ? "with buffer kinds mixed across ranks"
                                            : "with uniform buffer kinds");
    }
    tap_diag("%d cases, %d failed", cases_run, cases_failed);
    return mt_finish();
}
