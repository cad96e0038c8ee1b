/*
 * test_faults.c - coll/gpu when a rank fails or is late: the node team's setup failing on one
 * rank, and the hang reports and give-up of the waits (coll_gpu_hang_warn_seconds,
 * coll_gpu_hang_error_seconds).  The wrappers (teamfail.sh, hang.sh) set the parameters and
 * check the lines coll/gpu prints; this program checks the data and the return codes.
 *
 *   test_faults teamfail         device-buffer MPI_Allreduce and MPI_Bcast on world and a dup,
 *                                three rounds each, are right (run with coll_gpu_test_fail_team:
 *                                through staging); after MPI_Finalize no emulated allocation,
 *                                control block or mapping of either is left in this process
 *   test_faults late SECONDS WHERE
 *                                the last rank sleeps SECONDS before a device-buffer allreduce
 *                                (WHERE: "call", the second call through the team; "setup",
 *                                the first call, which builds the team); the result is right
 *   test_faults giveup SECONDS [bcast]
 *                                the last rank sleeps SECONDS before the second device-buffer
 *                                allreduce (or bcast from rank 1), with MPI_ERRORS_RETURN: with
 *                                coll_gpu_hang_error_seconds below SECONDS every rank gets an
 *                                error, the late one too, and so does the next call; host
 *                                collectives still work after
 *
 * Every allreduce runs on fresh random data (poisoned output first) against a host reference.
 * Device backend from coll_gpu_device: emulated (make check), or cuda for late and giveup
 * (tests/gpu/hang_cuda.sh; each rank takes GPU local rank % GPUs); teamfail counts emulated
 * allocations, so it needs the emulated device.  Exit: TAP.
 */
#include <dirent.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev.h"
#include "tap.h"

#define COUNT 1021

static int rank, size;
static unsigned seed_round;

/* Files under /dev/shm whose name starts with prefix. */
static int count_shm(const char *prefix)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int n = 0;

    if (NULL == d) {
        return -1;
    }
    while (NULL != (e = readdir(d))) {
        n += (0 == strncmp(e->d_name, prefix, strlen(prefix)));
    }
    closedir(d);
    return n;
}

/* Mappings of emulated device memory or control blocks (any process') left in this one. */
static int count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;

    if (NULL == f) {
        return -1;
    }
    while (NULL != fgets(line, sizeof(line), f)) {
        n += (NULL != strstr(line, "/dev/shm/collgpu-"));
    }
    fclose(f);
    return n;
}

/* rank r's input element i in round k: random, never zero, the same on every rank. */
static int32_t input(int r, int i, unsigned k)
{
    uint32_t x = (uint32_t) r * 2654435761u ^ (uint32_t) i * 40503u ^ (k + 1) * 2246822519u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (int32_t) (x % 1000u) + 1;
}

/* One device-buffer allreduce (sum of int32) on comm; *rc gets its return code.  Returns
 * whether the result is right (only meaningful when *rc is MPI_SUCCESS). */
static int device_allreduce(MPI_Comm comm, int *rc)
{
    int32_t host[COUNT], got[COUNT];
    void *s = NULL, *r = NULL;
    int me, n, ok = 1;
    unsigned k = seed_round++;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < COUNT; ++i) {
        host[i] = input(me, i, k);
        got[i] = -7;
    }
    if (DEV_OK != dev_mem_alloc(&s, sizeof(host)) || DEV_OK != dev_mem_alloc(&r, sizeof(host))
        || DEV_OK != dev_memcpy(s, host, sizeof(host))
        || DEV_OK != dev_memcpy(r, got, sizeof(got))) {
        *rc = MPI_ERR_OTHER;
        return 0;
    }
    *rc = MPI_Allreduce(s, r, COUNT, MPI_INT32_T, MPI_SUM, comm);
    ok = DEV_OK == dev_memcpy(got, r, sizeof(got));
    for (int i = 0; ok && i < COUNT; ++i) {
        int32_t want = 0;
        for (int q = 0; q < n; ++q) {
            want += input(q, i, k);
        }
        ok = (got[i] == want);
    }
    dev_mem_free(s);
    dev_mem_free(r);
    return ok;
}

/* A device-buffer bcast from root 1 (fresh data, poisoned elsewhere); right on this rank? */
static int device_bcast(MPI_Comm comm, int *rc)
{
    int32_t host[COUNT];
    void *b = NULL;
    int me, ok;
    unsigned k = seed_round++;

    MPI_Comm_rank(comm, &me);
    for (int i = 0; i < COUNT; ++i) {
        host[i] = (1 == me) ? input(1, i, k) : -7;
    }
    if (DEV_OK != dev_mem_alloc(&b, sizeof(host)) || DEV_OK != dev_memcpy(b, host, sizeof(host))) {
        *rc = MPI_ERR_OTHER;
        return 0;
    }
    *rc = MPI_Bcast(b, COUNT, MPI_INT32_T, 1, comm);
    ok = DEV_OK == dev_memcpy(host, b, sizeof(host));
    for (int i = 0; ok && i < COUNT; ++i) {
        ok = (host[i] == input(1, i, k));
    }
    dev_mem_free(b);
    return ok;
}

/* Every rank's flag, and-ed (host buffers: coll/gpu hands them to the component below). */
static int all(int mine)
{
    int every = 0;
    MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return every;
}

static int run_teamfail(void)
{
    char mine[64], ctl[64];
    MPI_Comm dup;
    int ok = 1, rc, left, ctl_left, maps_left;

    snprintf(mine, sizeof(mine), "collgpu-%d-", (int) getpid());
    snprintf(ctl, sizeof(ctl), "collgpu-ctl-%d-", (int) getpid());
    tap_plan(5);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int round = 0; round < 3; ++round) {
        ok &= device_allreduce(MPI_COMM_WORLD, &rc) && MPI_SUCCESS == rc;
        ok &= device_bcast(MPI_COMM_WORLD, &rc) && MPI_SUCCESS == rc;
        ok &= device_allreduce(dup, &rc) && MPI_SUCCESS == rc;
        ok &= device_bcast(dup, &rc) && MPI_SUCCESS == rc;
    }
    tap_ok(all(ok), "3 rounds of device-buffer allreduce and bcast on world and a dup are right "
                    "on every rank");
    tap_ok(all(0 == count_shm(ctl)), "no control block name is left after the setups");
    MPI_Comm_free(&dup);
    MPI_Finalize();

    /* counted while the backend is still open here (its last dev_close cleans up and would
     * hide a leak); each rank checks its own process, rank 0 reports */
    left = count_shm(mine);
    ctl_left = count_shm(ctl);
    maps_left = count_maps();
    dev_close();
    tap_ok(0 == left, "after MPI_Finalize no device allocation of this process is left (%d)",
           left);
    tap_ok(0 == ctl_left, "and no control block (%d)", ctl_left);
    tap_ok(0 == maps_left, "and no mapping of device memory or control block (%d)", maps_left);
    return (0 == left && 0 == ctl_left && 0 == maps_left && 0 == tap_failures()) ? 0 : 1;
}

static int run_late(int seconds, const char *where)
{
    int ok = 1, rc;
    bool late = (size - 1 == rank);

    tap_plan(2);
    if (0 == strcmp(where, "call")) {
        ok = device_allreduce(MPI_COMM_WORLD, &rc) && MPI_SUCCESS == rc;
    }
    tap_ok(all(ok), "the first allreduce is right");
    if (late) {
        sleep((unsigned) seconds);
    }
    ok = device_allreduce(MPI_COMM_WORLD, &rc) && MPI_SUCCESS == rc;
    tap_ok(all(ok), "the allreduce the last rank is %d s late for is right on every rank",
           seconds);
    MPI_Finalize();
    return tap_failures() ? 1 : 0;
}

static int run_giveup(int seconds, bool bcast)
{
    int (*call)(MPI_Comm, int *) = bcast ? device_bcast : device_allreduce;
    int ok, rc, every_err, late_err;
    bool late = (size - 1 == rank);

    tap_plan(5);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ok = call(MPI_COMM_WORLD, &rc) && MPI_SUCCESS == rc;
    tap_ok(all(ok), "the first %s is right", bcast ? "bcast" : "allreduce");
    if (late) {
        sleep((unsigned) seconds);
    }
    (void) call(MPI_COMM_WORLD, &rc);
    every_err = all(MPI_SUCCESS != rc || late);
    tap_ok(every_err, "every rank waiting for the late one gets an error");
    late_err = (MPI_SUCCESS != rc);
    MPI_Bcast(&late_err, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
    tap_ok(late_err, "the late rank gets an error too");
    (void) call(MPI_COMM_WORLD, &rc);
    tap_ok(all(MPI_SUCCESS != rc), "the next fast-path call fails on every rank alike");
    rc = MPI_Barrier(MPI_COMM_WORLD);
    tap_ok(all(MPI_SUCCESS == rc), "a host barrier still works");
    MPI_Finalize();
    return tap_failures() ? 1 : 0;
}

/* The whole program skips (tap.h's skip plan, exit 0), agreed by every rank before: after
 * MPI_Finalize, since mpirun calls an exit between MPI_Init and MPI_Finalize an error. */
static void skip_all(const char *why)
{
    MPI_Finalize();
    tap_skip_all(why);
}

/* Open the backend the component uses (after MPI_Init: the component, which shares the
 * device library with us, opened it first); with cuda take GPU local rank % GPUs. */
static int open_device(dev_backend_t backend)
{
    MPI_Comm node;
    int local = 0, count = 0;

    if ((DEV_BACKEND_EMULATED != backend && DEV_BACKEND_CUDA != backend)
        || DEV_OK != dev_open(backend)) {
        return 0;
    }
    if (DEV_BACKEND_EMULATED == backend) {
        return 1;
    }
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    return DEV_OK == dev_device_count(&count) && 0 < count
           && DEV_OK == dev_set_device(local % count);
}

int main(int argc, char **argv)
{
    const char *mode = (1 < argc) ? argv[1] : "";
    dev_backend_t backend;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_set_quiet(0 != rank);
    backend = dev_backend_from_name(getenv("OMPI_MCA_coll_gpu_device"));
    if (2 > size) {
        skip_all("needs 2 ranks or more");
    }
    if (!all(open_device(backend))) {
        if (DEV_BACKEND_EMULATED == backend) {
            /* every machine has the emulated device: not opening it is a failure */
            tap_ok(0, "open the emulated device backend on every rank (%s)", dev_error_string());
            tap_done();
            MPI_Finalize();
            return 1;
        }
        skip_all("no device backend (emulated or cuda) on every rank");
    }
    if (0 == strcmp(mode, "teamfail")) {
        if (DEV_BACKEND_EMULATED != backend) {
            skip_all("teamfail counts emulated allocations; not in use");
        }
        return run_teamfail();
    }
    if (0 == strcmp(mode, "late") && 3 < argc) {
        return run_late(atoi(argv[2]), argv[3]);
    }
    if (0 == strcmp(mode, "giveup") && 2 < argc) {
        return run_giveup(atoi(argv[2]), 3 < argc && 0 == strcmp(argv[3], "bcast"));
    }
    fprintf(stderr,
            "usage: test_faults teamfail | late SECONDS call|setup | giveup SECONDS [bcast]\n");
    MPI_Finalize();
    return 2;
}
