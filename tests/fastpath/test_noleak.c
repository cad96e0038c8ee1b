/*
 * test_noleak.c - coll/gpu releases what its teams hold: after communicators with a node team
 * are freed and MPI_Finalize has run, no emulated device allocation of this process is left
 * (the emulated backend names each one /dev/shm/collgpu-<pid>-<n>: the teams' scratch, the
 * user's buffers), and the control blocks' names (/dev/shm/collgpu-ctl-<pid>-<n>) are gone.
 *
 * Emulated device only (it is what makes allocations visible as files).  Exit: TAP.
 */
#include <dirent.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev.h"
#include "tap.h"

#define COUNT 4099

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

/* One allreduce and one bcast on device buffers, through the team (checked, fresh data). */
static int use_team(MPI_Comm comm)
{
    int32_t host[COUNT], got[COUNT];
    void *s = NULL, *r = NULL;
    int rank, size, bad = 0, any_bad = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int i = 0; i < COUNT; ++i) {
        host[i] = rank * 3 + i % 11 + 1;
    }
    bad |= DEV_OK != dev_mem_alloc(&s, sizeof(host)) || DEV_OK != dev_mem_alloc(&r, sizeof(host));
    bad |= DEV_OK != dev_memcpy(s, host, sizeof(host));
    bad |= MPI_SUCCESS != MPI_Allreduce(s, r, COUNT, MPI_INT32_T, MPI_SUM, comm);
    bad |= MPI_SUCCESS != MPI_Bcast(r, COUNT, MPI_INT32_T, 0, comm);
    bad |= DEV_OK != dev_memcpy(got, r, sizeof(got));
    for (int i = 0; !bad && i < COUNT; ++i) {
        int32_t want = 0;
        for (int q = 0; q < size; ++q) {
            want += q * 3 + i % 11 + 1;
        }
        bad |= (got[i] != want);
    }
    dev_mem_free(s);
    dev_mem_free(r);
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm);
    return !any_bad;
}

int main(int argc, char **argv)
{
    char mine[64], ctl[64];
    MPI_Comm dup, half;
    int rank, ok, left, ctl_left;

    snprintf(mine, sizeof(mine), "collgpu-%d-", (int) getpid());
    snprintf(ctl, sizeof(ctl), "collgpu-ctl-%d-", (int) getpid());
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_set_quiet(0 != rank);
    if (DEV_BACKEND_EMULATED != dev_backend_from_name(getenv("OMPI_MCA_coll_gpu_device"))
        || DEV_OK != dev_open(DEV_BACKEND_EMULATED)) {
        tap_skip_all("the emulated device makes allocations visible; not in use");
    }
    tap_plan(4);

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    ok = use_team(MPI_COMM_WORLD) && use_team(dup) && use_team(half);
    tap_ok(ok, "allreduce and bcast through the teams of world, a dup and a split are right");
    ok = (0 == count_shm(ctl));
    tap_ok(ok, "no control block name is left once the teams are set up");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    MPI_Finalize();

    /* Counted while this test still holds the backend open: its last dev_close() would remove
     * any leftover allocation itself and hide a leak.  Each rank checks its own files; rank 0
     * reports its own. */
    left = count_shm(mine);
    ctl_left = count_shm(ctl);
    dev_close();
    tap_ok(0 == left, "after MPI_Finalize no device allocation of this process is left (%d)", left);
    tap_ok(0 == ctl_left, "and no control block (%d)", ctl_left);
    return (0 == left && 0 == ctl_left && tap_failures() == 0) ? 0 : 1;
}
