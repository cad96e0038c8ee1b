/*
 * test_big.c - collectives of more than 2 GiB on device buffers.
 *
 *   MPI_Bcast of 2049 elements of a 1 MiB contiguous type (2 GiB + 1 MiB: the int count fits,
 *   the byte count does not fit an int)
 *   MPI_Allreduce in place, int32 sum, 2^29 + 1027 elements (2 GiB + 4108 bytes)
 *   MPI_Reduce_scatter_block in place, uint8 bxor, blocks of INT_MAX / size + 1 elements
 *   rounded up to 8 (2^30 on 2 ranks): each block's count fits an int, the whole input's
 *   (size x block, 2^31) does not, so the call cannot be one allreduce and is staged
 *   (coll_gpu_reduce.c).  In place, since that needs less memory than out of place (29 s
 *   against 51 s, one run each on 2 cores, most of it the kernel clearing fresh pages).  (The
 *   irregular MPI_Reduce_scatter of as many elements is not here: Open MPI 4.1.4's own,
 *   tuned, returns MPI_ERR_OTHER for it on host buffers, so staging cannot get it right.)
 *   MPI_Allgather in place, bytes, blocks of the same size: one exchange on the node team
 *
 * Byte counts, offsets, element counts and chunk loops past 2^31 must use size_t all the way
 * through the component.  The data are filled and checked in 64 MiB host chunks.  The test
 * skips itself (TAP skip) where memory is short: it needs about BIG_MEM_FACTOR times the
 * buffer per rank (device buffer, staging buffers, the host algorithm's temporaries), from
 * MemAvailable and, for the emulated device, from /dev/shm.  Meant for 2 ranks (big_count.sh).
 *
 * Usage: test_big [host]   (host: the same with host buffers, to time stock Open MPI)
 */
#include <limits.h>
#include <sys/statvfs.h>

#include "mpitest.h"

#define MiB ((size_t) 1 << 20)
#define CHUNK (64 * MiB)
#define BCAST_COUNT 2049 /* elements of 1 MiB */
#define ALLREDUCE_COUNT (((size_t) 1 << 29) + 1027)
#define BIG_MEM_FACTOR 4

/* Random 64-bit words by position: any chunk can be generated alone. */
static inline uint64_t word_at(uint64_t key, uint64_t i)
{
    uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Bytes [off, off+len) of stream key (off and len multiples of 8). */
static void fill_bytes(uint64_t key, size_t off, size_t len, uint8_t *out)
{
    uint64_t *w = (uint64_t *) out;
    for (size_t i = 0; i < len / 8; ++i) {
        w[i] = word_at(key, off / 8 + i);
    }
}

/* int32 elements [first, first+n) of rank r's allreduce input: 16-bit values, so sums are
 * exact; four of them from each random word. */
static int32_t int_at(uint64_t key, size_t i)
{
    return (int32_t) (int16_t) (word_at(key, i / 4) >> (16 * (i % 4)));
}

static void fill_ints(int r, size_t first, size_t n, int32_t *out)
{
    uint64_t key = 0xB16B00B5ull + (uint64_t) r;
    size_t i = 0;
    for (; i < n && 0 != (first + i) % 4; ++i) {
        out[i] = int_at(key, first + i);
    }
    for (; i + 4 <= n; i += 4) {
        uint64_t w = word_at(key, (first + i) / 4);
        out[i] = (int32_t) (int16_t) w;
        out[i + 1] = (int32_t) (int16_t) (w >> 16);
        out[i + 2] = (int32_t) (int16_t) (w >> 32);
        out[i + 3] = (int32_t) (int16_t) (w >> 48);
    }
    for (; i < n; ++i) {
        out[i] = int_at(key, first + i);
    }
}

static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    if (NULL == f) {
        return 0;
    }
    while (NULL != fgets(line, sizeof(line), f)) {
        if (1 == sscanf(line, "MemAvailable: %llu kB", &kb)) {
            break;
        }
    }
    fclose(f);
    return (size_t) kb * 1024;
}

/* MPI_Reduce_scatter_block in place, uint8 bxor, in blocks of INT_MAX / size + 1 elements,
 * rounded up to 8 (fill_bytes' unit): each rank's input (size blocks) has more than INT_MAX
 * elements.  h and e: the host chunks.  2 ranks or more. */
static void reduce_scatter_block_big(mt_mem_t kind, uint8_t *h, uint8_t *e)
{
    size_t rsb_block = ((size_t) INT_MAX / (size_t) mt_size / 8 + 1) * 8;
    size_t rsb_total = rsb_block * (size_t) mt_size;
    char diag[MT_DIAG_LEN];
    double t0, t1, t2;
    void *d;
    int rc, ok;

    mt_set_case("reduce_scatter_block > INT_MAX elements");
    diag[0] = '\0';
    t0 = MPI_Wtime();
    d = mt_mem_alloc(kind, rsb_total);
    ok = NULL != d;
    if (!ok) {
        mt_diag_add(diag, "cannot allocate %zu bytes of %s memory", rsb_total, mt_mem_name(kind));
    }
    for (size_t off = 0; ok && off < rsb_total; off += CHUNK) {
        size_t len = rsb_total - off < CHUNK ? rsb_total - off : CHUNK;
        fill_bytes(0x5CA77E7ull + (uint64_t) mt_rank, off, len, h);
        ok = 0 == mt_mem_put(kind, (uint8_t *) d + off, h, len);
    }
    rc = MPI_SUCCESS;
    if (!mt_agree(ok)) {
        mt_diag_add(diag, "%s", ok ? "the set-up failed on another rank" : "");
        ok = 0;
    }
    t1 = MPI_Wtime();
    if (ok) {
        rc = MPI_Reduce_scatter_block(MPI_IN_PLACE, d, (int) rsb_block, MPI_UINT8_T, MPI_BXOR,
                                      MPI_COMM_WORLD);
    }
    t2 = MPI_Wtime();
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Reduce_scatter_block: %s", mt_mpi_error(rc));
        ok = 0;
    }
    /* this rank's block, bytes [rank x block, (rank + 1) x block) of every rank's input, at
     * the start of its buffer (past it the in-place buffer is undefined) */
    for (size_t off = 0; ok && off < rsb_block; off += CHUNK) {
        size_t len = rsb_block - off < CHUNK ? rsb_block - off : CHUNK;
        size_t at = (size_t) mt_rank * rsb_block + off;
        uint8_t *acc = calloc(len, 1);
        ok = NULL != acc;
        for (int k = 0; ok && k < mt_size; ++k) {
            fill_bytes(0x5CA77E7ull + (uint64_t) k, at, len, e);
            for (size_t i = 0; i < len; ++i) {
                acc[i] ^= e[i];
            }
        }
        ok = ok && 0 == mt_mem_get(kind, h, (uint8_t *) d + off, len);
        for (size_t i = 0; ok && i < len; ++i) {
            if (h[i] != acc[i]) {
                mt_diag_add(diag, "element %zu of the block: expected 0x%02x got 0x%02x",
                            off + i, acc[i], h[i]);
                ok = 0;
            }
        }
        free(acc);
    }
    mt_mem_free(kind, d);
    mt_check(ok, diag, "MPI_Reduce_scatter_block in place, uint8 bxor, %d x %zu elements (%zu "
             "in all, INT_MAX %d) %s buffers, %.1f s (the call %.1f s)", mt_size, rsb_block,
             rsb_total, INT_MAX, mt_mem_name(kind), MPI_Wtime() - t0, t2 - t1);
}

/* MPI_Allgather in place, bytes, in blocks of INT_MAX / size + 1 elements rounded up to 8: each
 * block's count fits an int, the receive buffer's (size blocks) does not.  On device memory it
 * is one exchange on the node team (coll_gpu_exchange.c), whose sizes are size_t throughout
 * (before, the entry multiplied count x size in an int).  Every block is checked. */
static void allgather_big(mt_mem_t kind, uint8_t *h, uint8_t *e)
{
    size_t block = ((size_t) INT_MAX / (size_t) mt_size / 8 + 1) * 8;
    size_t total = block * (size_t) mt_size, mine = (size_t) mt_rank * block;
    char diag[MT_DIAG_LEN];
    double t0, t1, t2;
    void *d;
    int rc, ok;

    mt_set_case("allgather > INT_MAX elements");
    diag[0] = '\0';
    t0 = MPI_Wtime();
    d = mt_mem_alloc(kind, total);
    ok = NULL != d;
    if (!ok) {
        mt_diag_add(diag, "cannot allocate %zu bytes of %s memory", total, mt_mem_name(kind));
    }
    if (ok) { /* poison the blocks this rank receives */
        if (MT_MEM_DEVICE == kind) {
            ok = DEV_OK == dev_memset(d, 0xA5, total);
        } else {
            memset(d, 0xA5, total);
        }
    }
    for (size_t off = 0; ok && off < block; off += CHUNK) {
        size_t len = block - off < CHUNK ? block - off : CHUNK;
        fill_bytes(0xA11647ull + (uint64_t) mt_rank, off, len, h);
        ok = 0 == mt_mem_put(kind, (uint8_t *) d + mine + off, h, len);
    }
    rc = MPI_SUCCESS;
    if (!mt_agree(ok)) {
        mt_diag_add(diag, "%s", ok ? "the set-up failed on another rank" : "");
        ok = 0;
    }
    t1 = MPI_Wtime();
    if (ok) {
        rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d, (int) block, MPI_UINT8_T,
                           MPI_COMM_WORLD);
    }
    t2 = MPI_Wtime();
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Allgather: %s", mt_mpi_error(rc));
        ok = 0;
    }
    for (size_t at = 0, len = 0; ok && at < total; at += len) {
        size_t k = at / block, off = at - k * block;
        len = total - at < CHUNK ? total - at : CHUNK;
        len = block - off < len ? block - off : len; /* within block k */
        fill_bytes(0xA11647ull + (uint64_t) k, off, len, e);
        ok = 0 == mt_mem_get(kind, h, (uint8_t *) d + at, len);
        if (ok && 0 != memcmp(h, e, len)) {
            mt_diag_add(diag, "block %zu (from rank %zu), bytes %zu..%zu differ", k, k, off,
                        off + len);
            ok = 0;
        }
    }
    mt_mem_free(kind, d);
    mt_check(ok, diag, "MPI_Allgather in place, bytes, %d x %zu (%zu in all, INT_MAX %d) %s "
             "buffers, %.1f s (the call %.1f s)", mt_size, block, total, INT_MAX,
             mt_mem_name(kind), MPI_Wtime() - t0, t2 - t1);
}

int main(int argc, char **argv)
{
    mt_mem_t kind = MT_MEM_DEVICE;
    char why[300], diag[MT_DIAG_LEN];
    size_t bytes_b = (size_t) BCAST_COUNT * MiB, bytes_a = ALLREDUCE_COUNT * 4;
    size_t need, avail, local_ranks;
    uint8_t *h = NULL, *e = NULL;
    void *d = NULL;
    int rc, ok, short_mem, any_short;
    double t0, t1, t2;
    MPI_Datatype mib;
    MPI_Comm node;
    int nlocal;

    mt_init(&argc, &argv);
    if (argc > 1 && 0 == strcmp(argv[1], "host")) {
        kind = MT_MEM_HOST;
    } else if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }

    /* Memory: every rank of this node holds about BIG_MEM_FACTOR x the buffer at the peak. */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &nlocal);
    MPI_Comm_free(&node);
    local_ranks = (size_t) nlocal;
    need = local_ranks * BIG_MEM_FACTOR * bytes_a + 2 * CHUNK * local_ranks;
    avail = mem_available();
    short_mem = avail < need;
    snprintf(why, sizeof(why), "needs %.1f GiB of memory for %zu ranks, MemAvailable %.1f GiB",
             (double) need / (1 << 30), local_ranks, (double) avail / (1 << 30));
    if (!short_mem && MT_MEM_DEVICE == kind && DEV_BACKEND_EMULATED == dev_backend()) {
        /* emulated device memory lives in POSIX shared memory */
        struct statvfs sv;
        size_t shm_need = local_ranks * 2 * bytes_a;
        if (0 == statvfs("/dev/shm", &sv) && (size_t) sv.f_bavail * sv.f_frsize < shm_need) {
            short_mem = 1;
            snprintf(why, sizeof(why), "needs %.1f GiB in /dev/shm for the emulated device, "
                     "%.1f GiB free", (double) shm_need / (1 << 30),
                     (double) sv.f_bavail * sv.f_frsize / (1 << 30));
        }
    }
    MPI_Allreduce(&short_mem, &any_short, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_short) {
        mt_skip_all(short_mem ? why : "memory is short on another node");
    }
    tap_diag("%d ranks, %s buffers; %s", mt_size, mt_mem_name(kind), why);

    h = malloc(CHUNK);
    e = malloc(CHUNK);
    /* agreed: a rank that skipped alone would leave its peers in the first collective */
    if (!mt_agree(NULL != h && NULL != e)) {
        mt_skip_all("cannot allocate the host chunks (on some rank)");
    }

    /* ---- MPI_Bcast: 2049 x 1 MiB ---- */
    mt_set_case("bcast > 2 GiB");
    diag[0] = '\0';
    t0 = MPI_Wtime();
    MPI_Type_contiguous((int) MiB, MPI_BYTE, &mib);
    MPI_Type_commit(&mib);
    d = mt_mem_alloc(kind, bytes_b);
    ok = NULL != d;
    if (!ok) {
        mt_diag_add(diag, "cannot allocate %zu bytes of %s memory", bytes_b, mt_mem_name(kind));
    }
    if (ok && 0 != mt_rank) { /* poison the receivers */
        if (MT_MEM_DEVICE == kind) {
            ok = DEV_OK == dev_memset(d, 0xA5, bytes_b);
        } else {
            memset(d, 0xA5, bytes_b);
        }
    }
    for (size_t off = 0; ok && 0 == mt_rank && off < bytes_b; off += CHUNK) {
        size_t len = bytes_b - off < CHUNK ? bytes_b - off : CHUNK;
        fill_bytes(0xBCA57ull, off, len, h);
        ok = 0 == mt_mem_put(kind, (uint8_t *) d + off, h, len);
    }
    /* the ranks agree on the set-up (and line up for the timing): a rank whose buffer failed
     * must not leave its peers in the collective, nor call it with other arguments */
    rc = MPI_SUCCESS;
    if (!mt_agree(ok)) {
        mt_diag_add(diag, "%s", ok ? "the set-up failed on another rank" : "");
        ok = 0;
    }
    t1 = MPI_Wtime();
    if (ok) {
        rc = MPI_Bcast(d, BCAST_COUNT, mib, 0, MPI_COMM_WORLD);
    }
    t2 = MPI_Wtime();
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Bcast: %s", mt_mpi_error(rc));
        ok = 0;
    }
    /* the receivers check every byte (the root's buffer is its own input) */
    for (size_t off = 0; ok && 0 != mt_rank && off < bytes_b; off += CHUNK) {
        size_t len = bytes_b - off < CHUNK ? bytes_b - off : CHUNK;
        fill_bytes(0xBCA57ull, off, len, e);
        ok = 0 == mt_mem_get(kind, h, (uint8_t *) d + off, len);
        if (ok && 0 != memcmp(h, e, len)) {
            for (size_t i = 0; i < len; ++i) {
                if (h[i] != e[i]) {
                    mt_diag_add(diag, "byte %zu: expected 0x%02x got 0x%02x", off + i, e[i], h[i]);
                    break;
                }
            }
            ok = 0;
        }
    }
    mt_mem_free(kind, d);
    MPI_Type_free(&mib);
    mt_check(ok, diag, "MPI_Bcast of 2049 x 1 MiB contiguous type (%zu bytes) %s buffers, "
             "%.1f s (the call %.1f s)", bytes_b, mt_mem_name(kind), MPI_Wtime() - t0, t2 - t1);

    /* ---- MPI_Allreduce in place: int32 sum of 2^29 + 1027 elements ---- */
    mt_set_case("allreduce > 2 GiB");
    diag[0] = '\0';
    t0 = MPI_Wtime();
    d = mt_mem_alloc(kind, bytes_a);
    ok = NULL != d;
    if (!ok) {
        mt_diag_add(diag, "cannot allocate %zu bytes of %s memory", bytes_a, mt_mem_name(kind));
    }
    for (size_t off = 0; ok && off < bytes_a; off += CHUNK) {
        size_t len = bytes_a - off < CHUNK ? bytes_a - off : CHUNK;
        fill_ints(mt_rank, off / 4, len / 4, (int32_t *) h);
        ok = 0 == mt_mem_put(kind, (uint8_t *) d + off, h, len);
    }
    rc = MPI_SUCCESS;
    if (!mt_agree(ok)) {
        mt_diag_add(diag, "%s", ok ? "the set-up failed on another rank" : "");
        ok = 0;
    }
    t1 = MPI_Wtime();
    if (ok) {
        rc = MPI_Allreduce(MPI_IN_PLACE, d, (int) ALLREDUCE_COUNT, MPI_INT32_T, MPI_SUM,
                           MPI_COMM_WORLD);
    }
    t2 = MPI_Wtime();
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Allreduce: %s", mt_mpi_error(rc));
        ok = 0;
    }
    for (size_t off = 0; ok && off < bytes_a; off += CHUNK) {
        size_t len = bytes_a - off < CHUNK ? bytes_a - off : CHUNK, n = len / 4;
        int32_t *x = (int32_t *) e, *got = (int32_t *) h;
        int32_t *acc = calloc(n, 4);
        for (int r = 0; r < mt_size; ++r) {
            fill_ints(r, off / 4, n, x);
            for (size_t i = 0; i < n; ++i) {
                acc[i] += x[i];
            }
        }
        ok = 0 == mt_mem_get(kind, got, (uint8_t *) d + off, len);
        for (size_t i = 0; ok && i < n; ++i) {
            if (got[i] != acc[i]) {
                mt_diag_add(diag, "element %zu: expected %d got %d", off / 4 + i, acc[i], got[i]);
                ok = 0;
            }
        }
        free(acc);
    }
    mt_mem_free(kind, d);
    mt_check(ok, diag, "MPI_Allreduce in place, int32 sum, count %zu (%zu bytes) %s buffers, "
             "%.1f s (the call %.1f s)", (size_t) ALLREDUCE_COUNT, bytes_a, mt_mem_name(kind),
             MPI_Wtime() - t0, t2 - t1);

    /* ---- MPI_Reduce_scatter_block in place: uint8 bxor, size x block elements > INT_MAX ---- */
    if (1 < mt_size) {
        reduce_scatter_block_big(kind, h, e);
    } else {
        tap_skip("one rank: a block of more than INT_MAX elements has no int count",
                 "MPI_Reduce_scatter_block of more than INT_MAX elements in all");
    }
    /* ---- MPI_Allgather in place: bytes, size x block elements > INT_MAX ---- */
    if (1 < mt_size) {
        allgather_big(kind, h, e);
    } else {
        tap_skip("one rank: a block of more than INT_MAX elements has no int count",
                 "MPI_Allgather of more than INT_MAX elements in all");
    }

    free(h);
    free(e);
    return mt_finish();
}
