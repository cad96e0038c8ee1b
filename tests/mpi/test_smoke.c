/*
 * test_smoke.c - a few collectives that must work, for the scripts that look at coll/gpu from
 * the outside (no_device.sh, verbose.sh): what they check is the log and the exit, and this
 * program checks the data.
 *
 * Usage: test_smoke host     host buffers only; opens no device (works on any machine)
 *        test_smoke device   device buffers from the backend coll/gpu uses (without one: tap.h's
 *                            skip, or an error where the device is required; see mpitest.h)
 *
 * Cases: MPI_Allreduce (int32 sum), MPI_Bcast (double, last rank the root), MPI_Allgather
 * (int64), each on random data with a poisoned output, compared element by element.
 */
#include "mpitest.h"

#define COUNT 1031

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Input of a rank: count values of width bytes, all ranks can regenerate it. */
static void input(int rank, void *out, size_t count, size_t width)
{
    uint64_t s = 1000003u * (uint64_t) (rank + 1);
    for (size_t i = 0; i < count; ++i) {
        uint64_t v = next(&s);
        if (4 == width) {
            int32_t x = (int32_t) (v % 100000) - 50000;
            memcpy((char *) out + i * 4, &x, 4);
        } else {
            double x = (double) (int64_t) (v >> 12);
            memcpy((char *) out + i * 8, &x, 8);
        }
    }
}

int main(int argc, char **argv)
{
    mt_mem_t kind = MT_MEM_HOST;
    char why[300], diag[MT_DIAG_LEN];
    int32_t *in32 = malloc(COUNT * 4), *exp32 = calloc(COUNT, 4), *got32 = malloc(COUNT * 4);
    double *ind = malloc(COUNT * 8), *gotd = malloc(COUNT * 8);
    int64_t *got64 = NULL;
    void *sbuf, *rbuf;
    int rc, ok, root;

    mt_init(&argc, &argv);
    if (argc > 1 && 0 == strcmp(argv[1], "device")) {
        kind = MT_MEM_DEVICE;
        if (!mt_device_open(why, sizeof(why))) {
            mt_skip_all(why);
        }
    }
    tap_diag("%d ranks, %s buffers", mt_size, mt_mem_name(kind));

    /* MPI_Allreduce: int32 sum */
    mt_set_case("allreduce");
    diag[0] = '\0';
    sbuf = mt_mem_alloc(kind, COUNT * 4);
    rbuf = mt_mem_alloc(kind, COUNT * 4);
    input(mt_rank, in32, COUNT, 4);
    for (int r = 0; r < mt_size; ++r) {
        input(r, got32, COUNT, 4);
        for (int i = 0; i < COUNT; ++i) {
            exp32[i] += got32[i];
        }
    }
    memset(got32, 0xA5, COUNT * 4);
    ok = NULL != sbuf && NULL != rbuf && 0 == mt_mem_put(kind, sbuf, in32, COUNT * 4) &&
         0 == mt_mem_put(kind, rbuf, got32, COUNT * 4);
    rc = MPI_Allreduce(sbuf, rbuf, COUNT, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Allreduce: %s", mt_mpi_error(rc));
        ok = 0;
    }
    ok = ok && 0 == mt_mem_get(kind, got32, rbuf, COUNT * 4);
    for (int i = 0; ok && i < COUNT; ++i) {
        if (got32[i] != exp32[i]) {
            mt_diag_add(diag, "element %d: expected %d got %d", i, exp32[i], got32[i]);
            ok = 0;
        }
    }
    mt_check(ok, diag, "allreduce int32 sum count=%d %s buffers", COUNT, mt_mem_name(kind));
    mt_mem_free(kind, sbuf);
    mt_mem_free(kind, rbuf);

    /* MPI_Bcast: double, root the last rank */
    mt_set_case("bcast");
    diag[0] = '\0';
    root = mt_size - 1;
    rbuf = mt_mem_alloc(kind, COUNT * 8);
    input(root, ind, COUNT, 8);
    memset(gotd, 0xA5, COUNT * 8);
    ok = NULL != rbuf && 0 == mt_mem_put(kind, rbuf, mt_rank == root ? ind : gotd, COUNT * 8);
    rc = MPI_Bcast(rbuf, COUNT, MPI_DOUBLE, root, MPI_COMM_WORLD);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Bcast: %s", mt_mpi_error(rc));
        ok = 0;
    }
    ok = ok && 0 == mt_mem_get(kind, gotd, rbuf, COUNT * 8);
    for (int i = 0; ok && i < COUNT; ++i) {
        if (0 != memcmp(&gotd[i], &ind[i], 8)) {
            mt_diag_add(diag, "element %d: expected %g got %g", i, ind[i], gotd[i]);
            ok = 0;
        }
    }
    mt_check(ok, diag, "bcast double count=%d root=%d %s buffers", COUNT, root, mt_mem_name(kind));
    mt_mem_free(kind, rbuf);

    /* MPI_Allgather: one int64 per rank */
    mt_set_case("allgather");
    diag[0] = '\0';
    {
        int64_t mine = 1000 + 7 * (int64_t) mt_rank;
        got64 = malloc((size_t) mt_size * 8);
        memset(got64, 0xA5, (size_t) mt_size * 8);
        sbuf = mt_mem_alloc(kind, 8);
        rbuf = mt_mem_alloc(kind, (size_t) mt_size * 8);
        ok = NULL != sbuf && NULL != rbuf && 0 == mt_mem_put(kind, sbuf, &mine, 8) &&
             0 == mt_mem_put(kind, rbuf, got64, (size_t) mt_size * 8);
        rc = MPI_Allgather(sbuf, 1, MPI_INT64_T, rbuf, 1, MPI_INT64_T, MPI_COMM_WORLD);
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "MPI_Allgather: %s", mt_mpi_error(rc));
            ok = 0;
        }
        ok = ok && 0 == mt_mem_get(kind, got64, rbuf, (size_t) mt_size * 8);
        for (int r = 0; ok && r < mt_size; ++r) {
            if (got64[r] != 1000 + 7 * (int64_t) r) {
                mt_diag_add(diag, "element %d: expected %lld got %lld", r,
                            (long long) (1000 + 7 * r), (long long) got64[r]);
                ok = 0;
            }
        }
        mt_check(ok, diag, "allgather int64 count=1 %s buffers", mt_mem_name(kind));
        mt_mem_free(kind, sbuf);
        mt_mem_free(kind, rbuf);
        free(got64);
    }

    free(in32);
    free(exp32);
    free(got32);
    free(ind);
    free(gotd);
    return mt_finish();
}
