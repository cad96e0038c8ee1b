/*
 * test_dev_multi.c - dev_reduce_multi, the reduction of the intra-node allreduce (one-shot: n
 * sources into one destination; two-shot: n sources into n peers' destinations), on the
 * emulated backend: argument checks, every valid (op, dtype) for nsrc 1..5 and 16 and ndst 1..4
 * against the independent oracle of test_dev_oracle.h, in place, sources and destinations in
 * different allocations including ones imported from another process; binary16 and bfloat16
 * folded in float and rounded once (oracle_check_half_fold).
 */
#include "dev.h"
#include "tap.h"
#include "test_dev_oracle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_arguments(void)
{
    float h[4] = {1, 2, 3, 4};
    void *d = NULL, *e = NULL;
    const void *srcs[DEV_MULTI_MAX + 1];
    void *dsts[DEV_MULTI_MAX + 1];
    dev_launch_t bad_threads = {0, 1025}, bad_blocks = {-1, 0}, shape = {3, 96};
    unsigned char back[16];
    int rc;

    if (!tap_ok(DEV_OK == dev_mem_alloc(&d, 16) && DEV_OK == dev_mem_alloc(&e, 16),
                "allocate two device buffers")) {
        return;
    }
    dev_memcpy(d, h, sizeof(h));
    for (int k = 0; k <= DEV_MULTI_MAX; ++k) {
        srcs[k] = d;
        dsts[k] = e;
    }
    tap_ok(DEV_ERR_ARG == dev_reduce_multi(dsts, 0, srcs, 2, 4, DEV_T_FLOAT, DEV_OP_SUM, NULL,
                                           NULL),
           "ndst 0 is DEV_ERR_ARG");
    tap_ok(DEV_ERR_ARG == dev_reduce_multi(dsts, 1, srcs, 0, 4, DEV_T_FLOAT, DEV_OP_SUM, NULL,
                                           NULL),
           "nsrc 0 is DEV_ERR_ARG");
    tap_ok(DEV_ERR_ARG == dev_reduce_multi(dsts, 1, srcs, DEV_MULTI_MAX + 1, 4, DEV_T_FLOAT,
                                           DEV_OP_SUM, NULL, NULL)
               && DEV_ERR_ARG == dev_reduce_multi(dsts, DEV_MULTI_MAX + 1, srcs, 2, 4,
                                                  DEV_T_FLOAT, DEV_OP_SUM, NULL, NULL),
           "nsrc or ndst above DEV_MULTI_MAX (%d) is DEV_ERR_ARG", DEV_MULTI_MAX);
    tap_ok(DEV_ERR_ARG == dev_reduce_multi(NULL, 1, srcs, 2, 4, DEV_T_FLOAT, DEV_OP_SUM, NULL,
                                           NULL)
               && DEV_ERR_ARG == dev_reduce_multi(dsts, 1, NULL, 2, 4, DEV_T_FLOAT, DEV_OP_SUM,
                                                  NULL, NULL),
           "NULL pointer arrays are DEV_ERR_ARG");
    srcs[1] = NULL;
    rc = dev_reduce_multi(dsts, 1, srcs, 2, 4, DEV_T_FLOAT, DEV_OP_SUM, NULL, NULL);
    tap_ok(DEV_ERR_ARG == rc && NULL != strstr(dev_error_string(), "source 1"),
           "a NULL source is DEV_ERR_ARG and named (%s)", dev_error_string());
    srcs[1] = d;
    rc = dev_reduce_multi(dsts, 1, srcs, 2, 4, DEV_T_FLOAT, DEV_OP_BXOR, NULL, NULL);
    tap_ok(DEV_ERR_UNSUPPORTED == rc && NULL != strstr(dev_error_string(), "bxor"),
           "bxor on float with two sources is DEV_ERR_UNSUPPORTED (%s)", dev_error_string());
    tap_ok(DEV_ERR_ARG == dev_reduce_multi(dsts, 1, srcs, 1, 4, DEV_T_COUNT, DEV_OP_SUM, NULL,
                                           NULL),
           "an invalid dtype is DEV_ERR_ARG, even for a copy");
    tap_ok(DEV_ERR_ARG == dev_reduce_multi(dsts, 1, srcs, 2, 4, DEV_T_FLOAT, DEV_OP_SUM,
                                           &bad_threads, NULL)
               && DEV_ERR_ARG == dev_reduce_multi(dsts, 1, srcs, 2, 4, DEV_T_FLOAT, DEV_OP_SUM,
                                                  &bad_blocks, NULL),
           "a launch shape with 1025 threads or negative blocks is DEV_ERR_ARG");
    rc = dev_reduce_multi(dsts, 1, srcs, 2, (size_t) -1 / 2, DEV_T_FLOAT, DEV_OP_SUM, NULL,
                          NULL);
    tap_ok(DEV_ERR_ARG == rc, "a count whose bytes overflow is DEV_ERR_ARG (%s)",
           dev_error_string());
    rc = dev_reduce_multi(dsts, 1, srcs, 2, 5, DEV_T_FLOAT, DEV_OP_SUM, NULL, NULL);
    tap_ok(DEV_ERR_ARG == rc && NULL != strstr(dev_error_string(), "past the end"),
           "a reduction running past a device allocation fails (%s)", dev_error_string());

    dev_memset(e, POISON, 16);
    tap_ok(DEV_OK == dev_reduce_multi(dsts, 1, srcs, 2, 0, DEV_T_FLOAT, DEV_OP_SUM, NULL, NULL)
               && DEV_OK == dev_reduce_multi(dsts, 3, srcs, 1, 0, DEV_T_CDOUBLE, DEV_OP_MAXLOC,
                                             NULL, NULL),
           "count 0 is a no-op");
    dev_memcpy(back, e, 16);
    tap_ok(back[0] == POISON && back[15] == POISON, "and leaves the destination alone");
    rc = dev_reduce_multi(dsts, 1, srcs, 3, 4, DEV_T_FLOAT, DEV_OP_SUM, &shape, NULL);
    dev_memcpy(back, e, 16);
    tap_ok(DEV_OK == rc && 0 == memcmp(back, (float[4]){3, 6, 9, 12}, 16),
           "three sources, all the same buffer, summed with an explicit launch shape");
    dev_mem_free(d);
    dev_mem_free(e);
}

/* Host pattern generator shared by both sides of the fork: float sources for the IPC test. */
static void ipc_pattern(float *p, size_t n, int seed)
{
    for (size_t i = 0; i < n; ++i) {
        p[i] = (float) ((int) ((i * 37 + (size_t) seed * 101) % 199) - 99) / 8.0f + 0.0625f;
    }
}

enum { IPC_COUNT = 5000 };

/*
 * A child process allocates a source A and a destination B, exports both and waits; the
 * parent imports them and reduces sources (local0, A, local1) into (its own D, imported B),
 * then A = local0 + A + local1 in place through the import.  The child then checks, through
 * its own pointers, what the parent wrote.  Exit codes of the child name its failing step.
 */
static void test_ipc(void)
{
    const size_t bytes = IPC_COUNT * sizeof(float);
    float *h0 = malloc(bytes), *ha = malloc(bytes), *h1 = malloc(bytes), *back = malloc(bytes);
    float *want = malloc(bytes);
    int to_parent[2], to_child[2], status = -1;
    dev_ipc_handle_t handles[2];
    void *l0 = NULL, *l1 = NULL, *dd = NULL, *ia = NULL, *ib = NULL;
    char go = 0;
    bool ok;
    pid_t pid;

    ipc_pattern(h0, IPC_COUNT, 1);
    ipc_pattern(ha, IPC_COUNT, 2);
    ipc_pattern(h1, IPC_COUNT, 3);
    for (size_t i = 0; i < IPC_COUNT; ++i) {
        want[i] = (h0[i] + ha[i]) + h1[i];
    }
    if (0 != pipe(to_parent) || 0 != pipe(to_child)) {
        tap_ok(0, "pipe");
        return;
    }
    pid = fork();
    if (0 == pid) {
        void *a = NULL, *b = NULL;
        close(to_parent[0]);
        close(to_child[1]);
        if (DEV_OK != dev_mem_alloc(&a, bytes) || DEV_OK != dev_mem_alloc(&b, bytes + 64)
            || DEV_OK != dev_memcpy(a, ha, bytes) || DEV_OK != dev_memset(b, POISON, bytes + 64)
            || DEV_OK != dev_ipc_export(a, &handles[0])
            || DEV_OK != dev_ipc_export(b, &handles[1])) {
            _exit(30);
        }
        if (sizeof(handles) != write(to_parent[1], handles, sizeof(handles))) {
            _exit(31);
        }
        if (1 != read(to_child[0], &go, 1)) {
            _exit(32);
        }
        if (DEV_OK != dev_memcpy(back, b, bytes) || 0 != memcmp(back, want, bytes)) {
            _exit(33); /* the parent's two-destination store did not arrive */
        }
        if (DEV_OK != dev_memcpy(back, a, bytes) || 0 != memcmp(back, want, bytes)) {
            _exit(34); /* the in-place result did not arrive */
        }
        dev_mem_free(a);
        dev_mem_free(b);
        _exit(0);
    }
    close(to_parent[1]);
    close(to_child[0]);

    ok = sizeof(handles) == read(to_parent[0], handles, sizeof(handles))
         && DEV_OK == dev_ipc_import(&handles[0], &ia) && DEV_OK == dev_ipc_import(&handles[1], &ib);
    if (!tap_ok(ok, "import a source and a destination exported by a child")) {
        tap_diag("%s", dev_error_string());
    }
    ok = ok && DEV_OK == dev_mem_alloc(&l0, bytes) && DEV_OK == dev_mem_alloc(&l1, bytes)
         && DEV_OK == dev_mem_alloc(&dd, bytes) && DEV_OK == dev_memcpy(l0, h0, bytes)
         && DEV_OK == dev_memcpy(l1, h1, bytes);
    if (ok) {
        const void *srcs[3] = {l0, ia, l1};
        void *dsts[2] = {dd, ib};
        int rc = dev_reduce_multi(dsts, 2, srcs, 3, IPC_COUNT, DEV_T_FLOAT, DEV_OP_SUM, NULL,
                                  NULL);
        if (!tap_ok(DEV_OK == rc && DEV_OK == dev_memcpy(back, dd, bytes)
                        && 0 == memcmp(back, want, bytes),
                    "local, imported, local sources summed in order into a local destination")) {
            tap_diag("%s", dev_error_string());
        }
        tap_ok(DEV_OK == dev_memcpy(back, ib, bytes) && 0 == memcmp(back, want, bytes),
               "and the same bits into the imported destination");
        dsts[0] = ia; /* in place through the import: A = l0 + A + l1 */
        rc = dev_reduce_multi(dsts, 1, srcs, 3, IPC_COUNT, DEV_T_FLOAT, DEV_OP_SUM, NULL, NULL);
        if (!tap_ok(DEV_OK == rc && DEV_OK == dev_memcpy(back, ia, bytes)
                        && 0 == memcmp(back, want, bytes),
                    "in place into an imported source")) {
            tap_diag("%s", dev_error_string());
        }
        rc = dev_reduce_multi(dsts, 1, srcs, 3, IPC_COUNT + 1, DEV_T_FLOAT, DEV_OP_SUM, NULL,
                              NULL);
        tap_ok(DEV_ERR_ARG == rc, "running past an imported allocation fails (%s)",
               dev_error_string());
    }
    tap_ok(DEV_OK == dev_ipc_close(ia) && DEV_OK == dev_ipc_close(ib), "close the imports");
    (void) !write(to_child[1], "g", 1);
    waitpid(pid, &status, 0);
    tap_ok(WIFEXITED(status) && 0 == WEXITSTATUS(status),
           "the child sees both results through its own pointers (exit %d)",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    close(to_parent[0]);
    close(to_child[1]);
    dev_mem_free(l0);
    dev_mem_free(l1);
    dev_mem_free(dd);
    free(h0);
    free(ha);
    free(h1);
    free(back);
    free(want);
}

int main(void)
{
    if (DEV_OK != dev_open(DEV_BACKEND_EMULATED)) {
        tap_ok(0, "dev_open(emulated): %s", dev_error_string());
        return tap_done();
    }
    test_arguments();
    oracle_check_all_multi("emulated");
    oracle_check_multi_paths("emulated");
    oracle_check_half_fold("emulated");
    test_ipc();
    dev_close();
    printf("# %d passed, %d failed\n", tap_count_ - tap_failures(), tap_failures());
    return tap_done();
}
