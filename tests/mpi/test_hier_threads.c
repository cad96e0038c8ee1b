/*
 * test_hier_threads.c - hierarchical collectives in flight at once on different communicators
 * (MPI_THREAD_MULTIPLE): each of NTHREADS threads runs its own loop of MPI_Allreduce (int32
 * sum, several pipeline chunks) and MPI_Bcast on device buffers over its own duplicate of
 * MPI_COMM_WORLD, so that the leaders' UCX messages of different communicators are in flight
 * on the one worker at the same time and must not mix (their tags carry the communicator).
 * Run by tests/mpi/hier.sh with coll_gpu_emulate_nodes set.  Skips when MPI does not grant
 * MPI_THREAD_MULTIPLE.
 *
 * Usage: test_hier_threads [chunk_bytes]
 */
#include "mpitest.h"

#define NTHREADS 2
#define ITERS 20

typedef struct {
    int id;
    MPI_Comm comm;
    size_t count;
    int ok;
    char diag[MT_DIAG_LEN];
} worker_t;

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* rank's input of (thread, iteration): every rank can compute every rank's */
static void input(int id, int it, int rank, int32_t *out, size_t count)
{
    uint64_t s = ((uint64_t) id * 1000 + (uint64_t) it) * 7919u + (uint64_t) rank * 104729u + 1;
    for (size_t i = 0; i < count; ++i) {
        out[i] = (int32_t) (mix(&s) % 20001) - 10000;
    }
}

static void *worker(void *arg)
{
    worker_t *w = arg;
    size_t bytes = w->count * 4;
    int32_t *exp, *tmp, *got;
    void *sbuf, *rbuf;
    int rc;

    exp = malloc(bytes);
    tmp = malloc(bytes);
    got = malloc(bytes);
    sbuf = mt_mem_alloc(MT_MEM_DEVICE, bytes);
    rbuf = mt_mem_alloc(MT_MEM_DEVICE, bytes);
    w->ok = NULL != exp && NULL != tmp && NULL != got && NULL != sbuf && NULL != rbuf;
    for (int it = 0; w->ok && it < ITERS; ++it) {
        int root = it % mt_size;

        /* allreduce */
        memset(exp, 0, bytes);
        for (int r = 0; r < mt_size; ++r) {
            input(w->id, it, r, tmp, w->count);
            for (size_t i = 0; i < w->count; ++i) {
                exp[i] += tmp[i];
            }
        }
        input(w->id, it, mt_rank, tmp, w->count);
        memset(got, 0xA5, bytes);
        if (0 != mt_mem_put(MT_MEM_DEVICE, sbuf, tmp, bytes)
            || 0 != mt_mem_put(MT_MEM_DEVICE, rbuf, got, bytes)) {
            mt_diag_add(w->diag, "thread %d: buffer setup failed", w->id);
            w->ok = 0;
            break;
        }
        rc = MPI_Allreduce(sbuf, rbuf, (int) w->count, MPI_INT32_T, MPI_SUM, w->comm);
        if (MPI_SUCCESS != rc || 0 != mt_mem_get(MT_MEM_DEVICE, got, rbuf, bytes)
            || 0 != memcmp(got, exp, bytes)) {
            mt_diag_add(w->diag, "thread %d iteration %d: allreduce %s", w->id, it,
                        MPI_SUCCESS != rc ? mt_mpi_error(rc) : "differs from the reference");
            w->ok = 0;
            break;
        }
        /* bcast of the root's input */
        input(w->id, it, root, exp, w->count);
        memset(got, 0xA5, bytes);
        if (0 != mt_mem_put(MT_MEM_DEVICE, rbuf, mt_rank == root ? exp : got, bytes)) {
            w->ok = 0;
            break;
        }
        rc = MPI_Bcast(rbuf, (int) w->count, MPI_INT32_T, root, w->comm);
        if (MPI_SUCCESS != rc || 0 != mt_mem_get(MT_MEM_DEVICE, got, rbuf, bytes)
            || 0 != memcmp(got, exp, bytes)) {
            mt_diag_add(w->diag, "thread %d iteration %d: bcast from %d %s", w->id, it, root,
                        MPI_SUCCESS != rc ? mt_mpi_error(rc) : "differs from the root's");
            w->ok = 0;
            break;
        }
    }
    mt_mem_free(MT_MEM_DEVICE, sbuf);
    mt_mem_free(MT_MEM_DEVICE, rbuf);
    free(exp);
    free(tmp);
    free(got);
    return NULL;
}

int main(int argc, char **argv)
{
    char why[300];
    size_t chunk = (argc > 1) ? (size_t) strtoull(argv[1], NULL, 10) : 4096;
    worker_t w[NTHREADS];
    char devdiag[MT_DIAG_LEN] = "";
    int on_device;

    mt_init_threads(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    tap_diag("%d ranks, %d threads, device buffers, chunk %zu B", mt_size, NTHREADS, chunk);
    for (int t = 0; t < NTHREADS; ++t) {
        memset(&w[t], 0, sizeof(w[t]));
        w[t].id = t;
        w[t].count = (3 * chunk + 40) / 4;
        MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
        MPI_Comm_set_errhandler(w[t].comm, MPI_ERRORS_RETURN);
    }
    on_device = mt_threads_run(NTHREADS, worker, w, sizeof(w[0]), devdiag);
    for (int t = 0; t < NTHREADS; ++t) {
        mt_check(w[t].ok && on_device, on_device ? w[t].diag : devdiag,
                 "thread %d: %d allreduce + bcast of %zu int32 on its own communicator, "
                 "concurrently with the other thread", t, ITERS, w[t].count);
        MPI_Comm_free(&w[t].comm);
    }
    return mt_finish();
}
