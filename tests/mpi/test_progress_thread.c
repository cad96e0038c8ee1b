/*
 * test_progress_thread.c - requests of a node team completed by another thread (issue 19, item
 * 5): the main thread, on its device, posts nonblocking allreduces and bcasts of device buffers
 * on a communicator whose node team runs them, and another thread completes them with
 * MPI_Wait:
 *   fresh    a thread that never touched the device layer (CUDA: no context current on it);
 *   other    a thread that works on another device (dev_set_device; needs two devices: the
 *            emulated run sets COLL_GPU_EMULATED_DEVICES=2; skipped with one GPU).
 * Every result matches the reference, and each thread is still on its own device afterwards
 * (the team's steps run on the team's device and give the thread its own back).  Skips when MPI
 * does not grant MPI_THREAD_MULTIPLE.  Run by progress_thread.sh and gpu/progress_thread_cuda.sh.
 */
#include <pthread.h>

#include "mpitest.h"

#define NREQS 6

static const size_t counts[NREQS] = {2, 1000, 3, 40000, 7, 262144};

typedef struct {
    int device;           /* -1: never touch the device layer */
    MPI_Request *reqs;
    int rc, after, after_rc;
} waiter_t;

static int32_t value(int call, int rank, size_t i)
{
    uint32_t x = (uint32_t) (call * 7919 + rank * 104729 + 1) * 2654435761u ^ (uint32_t) i;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    return (int32_t) (x % 2001) - 1000;
}

static void *waiter(void *arg)
{
    waiter_t *w = arg;

    if (0 <= w->device && DEV_OK != dev_set_device(w->device)) {
        w->rc = MPI_ERR_OTHER;
        return NULL;
    }
    /* one at a time: MPI_Waitall may return at the first request that fails, leaving the
     * others pending (MPI_ERR_PENDING), and their buffers must outlive them */
    for (int c = 0; c < NREQS; ++c) {
        int rc = MPI_Wait(&w->reqs[c], MPI_STATUS_IGNORE);
        w->rc = (MPI_SUCCESS == w->rc) ? rc : w->rc;
    }
    if (0 <= w->device) {
        w->after_rc = dev_current_device(&w->after);
    }
    return NULL;
}

/* One round: post NREQS calls on comm from this thread, complete them on a thread of the given
 * device, check every result and both threads' devices. */
static void round_on(MPI_Comm comm, int main_device, int device, const char *label)
{
    void *buf[NREQS];
    int32_t *host[NREQS];
    MPI_Request reqs[NREQS];
    waiter_t w = {.device = device, .reqs = reqs, .rc = MPI_SUCCESS, .after = -1};
    pthread_t th;
    char diag[MT_DIAG_LEN] = "";
    int ok = 1, now = -1;

    for (int c = 0; c < NREQS; ++c) {
        size_t n = counts[c];
        int root = c % mt_size;
        host[c] = malloc(n * sizeof(int32_t));
        buf[c] = mt_mem_alloc(MT_MEM_DEVICE, n * sizeof(int32_t));
        if (NULL == host[c] || NULL == buf[c]) {
            mt_skip_all("out of memory");
        }
        for (size_t i = 0; i < n; ++i) {
            host[c][i] = (0 == c % 2 || mt_rank == root) ? value(c, mt_rank, i) : 0x5A5A5A5A;
        }
        if (0 != mt_mem_put(MT_MEM_DEVICE, buf[c], host[c], n * sizeof(int32_t))) {
            mt_skip_all("cannot fill a device buffer");
        }
        if (0 == c % 2) {
            MPI_Iallreduce(MPI_IN_PLACE, buf[c], (int) n, MPI_INT32_T, MPI_SUM, comm, &reqs[c]);
        } else {
            MPI_Ibcast(buf[c], (int) n, MPI_INT32_T, root, comm, &reqs[c]);
        }
    }
    pthread_create(&th, NULL, waiter, &w);
    pthread_join(th, NULL);
    if (MPI_SUCCESS != w.rc) {
        mt_diag_add(diag, "MPI_Wait on the other thread: %s; ", mt_mpi_error(w.rc));
        ok = 0;
    }
    for (int c = 0; c < NREQS && MPI_SUCCESS == w.rc; ++c) {
        size_t n = counts[c], bad = 0;
        int root = c % mt_size;
        if (0 != mt_mem_get(MT_MEM_DEVICE, host[c], buf[c], n * sizeof(int32_t))) {
            mt_diag_add(diag, "call %d: cannot read the result; ", c);
            ok = 0;
            continue;
        }
        for (size_t i = 0; i < n; ++i) {
            int32_t want = 0;
            if (0 == c % 2) {
                for (int r = 0; r < mt_size; ++r) {
                    want += value(c, r, i);
                }
            } else {
                want = value(c, root, i);
            }
            bad += (host[c][i] != want);
        }
        if (0 != bad) {
            mt_diag_add(diag, "%s of %zu int32: %zu wrong; ", (0 == c % 2) ? "allreduce" : "bcast",
                        n, bad);
            ok = 0;
        }
    }
    if (0 <= device && (DEV_OK != w.after_rc || device != w.after)) {
        mt_diag_add(diag, "the other thread is on device %d afterwards, not %d; ", w.after,
                    device);
        ok = 0;
    }
    if (DEV_OK != dev_current_device(&now) || now != main_device) {
        mt_diag_add(diag, "the main thread is on device %d afterwards, not %d; ", now,
                    main_device);
        ok = 0;
    }
    mt_check(ok, diag, "%s: %d nonblocking allreduce and bcast of device buffers posted here, "
             "completed by MPI_Wait on %s", label, NREQS, label);
    for (int c = 0; c < NREQS; ++c) {
        mt_mem_free(MT_MEM_DEVICE, buf[c]);
        free(host[c]);
    }
}

int main(int argc, char **argv)
{
    char why[300];
    int main_device = 0, ndev = 0, one = 1, sum = 0;
    void *d;
    MPI_Comm comm;

    mt_init_threads(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (DEV_OK != dev_current_device(&main_device) || DEV_OK != dev_device_count(&ndev)) {
        mt_skip_all("no current device");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    /* a blocking all-device call first: the node team is set up, and the communicator's
     * nonblocking calls of device buffers take it (coll_gpu_kinds.c) */
    d = mt_mem_alloc(MT_MEM_DEVICE, sizeof(int));
    if (NULL == d || 0 != mt_mem_put(MT_MEM_DEVICE, d, &one, sizeof(int))
        || MPI_SUCCESS != MPI_Allreduce(MPI_IN_PLACE, d, 1, MPI_INT, MPI_SUM, comm)
        || 0 != mt_mem_get(MT_MEM_DEVICE, &sum, d, sizeof(int)) || sum != mt_size) {
        mt_skip_all("the first device allreduce failed");
    }
    mt_mem_free(MT_MEM_DEVICE, d);
    round_on(comm, main_device, -1, "a fresh thread");
    if (1 < ndev) {
        round_on(comm, main_device, (main_device + 1) % ndev, "a thread on another device");
    } else {
        tap_skip("one device only", "a thread on another device");
    }
    MPI_Comm_free(&comm);
    return mt_finish();
}
