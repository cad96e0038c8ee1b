/*
 * test_noleak.c - coll/gpu releases what its teams hold when their communicators are freed and
 * at MPI_Finalize.
 *
 * Emulated backend (fastpath/noleak.sh): after communicators with a node team are freed and
 * MPI_Finalize has run, no emulated device allocation of this process is left (the emulated
 * backend names each one /dev/shm/collgpu-<pid>-<n>: the teams' scratch, the user's buffers),
 * and the control blocks' names (/dev/shm/collgpu-ctl-<pid>-<n>) are gone.  Before that, the
 * mappings of peers' allocations that the peers have freed (their names unlinked: "(deleted)" in
 * /proc/self/maps), each of which holds the peer's memory as an IPC mapping of a freed buffer
 * does on a GPU, do not grow over cycles of teams made and freed.  Persistent allreduce and
 * bcast requests of the team's path (coll_gpu_engine.c) freed before their first start,
 * freed while active in their second start, and outliving their communicator give back the
 * communicator's team: this process's device allocations and control block mappings are as
 * many as before, its mappings of peers' allocations no more, and the results are right.
 *
 * cuda backend (gpu/noleak_cuda.sh): the driver's free memory on each rank's GPU
 * (cuMemGetInfo, after a barrier, so that every rank sharing the GPU is at the same point)
 * does not shrink over CYCLES rounds of: duplicate and split a communicator, run an allreduce
 * and a bcast through the new teams on fresh device buffers, free the buffers and the
 * communicators.  A team that kept its scratch (2 MiB a rank) or an IPC mapping of a freed
 * user buffer (which holds the peer's memory) would cost at least CYCLES x 2 MiB.
 *
 * Exit: TAP.
 */
#include <dirent.h>
#include <dlfcn.h>

#include "mpi/mpitest.h"

/* Open MPI 4.1 has the persistent collectives as MPIX_<coll>_init (pcollreq extension) */
#if OMPI_MAJOR_VERSION < 5
#    include <mpi-ext.h>
#    define MPI_Allreduce_init MPIX_Allreduce_init
#    define MPI_Bcast_init MPIX_Bcast_init
#endif

#define COUNT 4099
#define CYCLES 24
#define MiB (1024.0 * 1024.0)
/* cuda: what the driver may take or give back on its own over the cycles (allocation
 * granularity, lazily created internal state), well below CYCLES x one team's scratch */
#define SLACK_BYTES (16u << 20)

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

/* Mappings in this process of peers' emulated allocations whose names are unlinked (freed by
 * their owner); mine is this process's own prefix ("collgpu-<pid>-"). */
static int count_stale_peer_maps(const char *mine)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int n = 0;

    if (NULL == f) {
        return -1;
    }
    while (NULL != fgets(line, sizeof(line), f)) {
        const char *name = strstr(line, "/dev/shm/collgpu-");
        n += NULL != name && NULL == strstr(name, mine) && NULL == strstr(name, "collgpu-ctl-")
             && NULL != strstr(name, "(deleted)");
    }
    fclose(f);
    return n;
}

/* Lines of /proc/self/maps that name "/dev/shm/<prefix>": the control blocks ("collgpu-ctl-")
 * a live team maps, whose names are unlinked once the team is set up. */
static int count_maps(const char *prefix)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024], path[128];
    int n = 0;

    if (NULL == f) {
        return -1;
    }
    snprintf(path, sizeof(path), "/dev/shm/%s", prefix);
    while (NULL != fgets(line, sizeof(line), f)) {
        n += NULL != strstr(line, path);
    }
    fclose(f);
    return n;
}

/* What a leaked team keeps: this process's device allocations (its scratch), the control
 * blocks it maps, and the mappings of peers' allocations (their scratch). */
typedef struct {
    int own, ctl, peer;
} live_t;

static void count_live(const char *mine, live_t *l)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];

    l->own = count_shm(mine);
    l->ctl = count_maps("collgpu-ctl-");
    l->peer = 0;
    if (NULL == f) {
        l->peer = -1;
        return;
    }
    while (NULL != fgets(line, sizeof(line), f)) {
        const char *name = strstr(line, "/dev/shm/collgpu-");
        l->peer += NULL != name && NULL == strstr(name, mine)
                   && NULL == strstr(name, "collgpu-ctl-");
    }
    fclose(f);
}

/* Persistent requests of the node team's path (MPI_Allreduce_init, MPI_Bcast_init on device
 * buffers, coll_gpu_uniform_buffers) on a fresh communicator, released in one of three ways:
 *   PERS_UNSTARTED   freed before their first start
 *   PERS_FREE_ACTIVE started and completed once, started again and freed while active (a
 *                    blocking allreduce on the communicator then drains the team's queue); the
 *                    second start's result must still land in the user's buffers
 *   PERS_COMM_FIRST  started, the communicator freed, then waited for and freed
 * Then the buffers and the communicator are freed: the caller compares what is live.  Every
 * world rank calls it.  Returns 1 when every rank's results were right. */
#define PERS_UNSTARTED 0
#define PERS_FREE_ACTIVE 1
#define PERS_COMM_FIRST 2

static int pers_check(void *dev, size_t count, int salt, int nranks, int bcast)
{
    int32_t *got = malloc(count * sizeof(int32_t));
    int bad = (NULL == got) || DEV_OK != dev_memcpy(got, dev, count * sizeof(int32_t));

    for (size_t i = 0; !bad && i < count; ++i) {
        int32_t want = 0;
        if (bcast) {
            want = (int32_t) (1000 + (int) (i % 13) + salt); /* root 0's */
        } else {
            for (int q = 0; q < nranks; ++q) {
                want += (int32_t) (q * 3 + (int) (i % 11) + salt);
            }
        }
        bad |= (got[i] != want);
    }
    free(got);
    return !bad;
}

static int pers_fill(void *s, void *r, void *b, size_t count, int rank, int salt)
{
    size_t bytes = count * sizeof(int32_t);
    int32_t *host = malloc(bytes);
    int ok = NULL != host;

    for (size_t i = 0; ok && i < count; ++i) {
        host[i] = (int32_t) (rank * 3 + (int) (i % 11) + salt);
    }
    ok = ok && DEV_OK == dev_memcpy(s, host, bytes);
    for (size_t i = 0; ok && i < count; ++i) {
        host[i] = (int32_t) -7; /* poison: the result must overwrite it */
    }
    ok = ok && DEV_OK == dev_memcpy(r, host, bytes);
    for (size_t i = 0; ok && i < count; ++i) {
        host[i] = (0 == rank) ? (int32_t) (1000 + (int) (i % 13) + salt) : (int32_t) -7;
    }
    ok = ok && DEV_OK == dev_memcpy(b, host, bytes);
    free(host);
    return ok;
}

static int pers_case(int how, size_t count, int salt)
{
    size_t bytes = count * sizeof(int32_t);
    void *s = NULL, *r = NULL, *b = NULL, *t = NULL;
    MPI_Request ar = MPI_REQUEST_NULL, bc = MPI_REQUEST_NULL;
    MPI_Comm comm;
    int rank, size, ok, all_ok = 0;

    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ok = DEV_OK == dev_mem_alloc(&s, bytes) && DEV_OK == dev_mem_alloc(&r, bytes)
         && DEV_OK == dev_mem_alloc(&b, bytes) && DEV_OK == dev_mem_alloc(&t, bytes)
         && pers_fill(s, r, b, count, rank, salt);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    if (!ok) {
        goto out;
    }
    /* the team is set up by a blocking call on device memory */
    ok = MPI_SUCCESS == MPI_Allreduce(s, t, (int) count, MPI_INT32_T, MPI_SUM, comm);
    ok = ok && MPI_SUCCESS == MPI_Allreduce_init(s, r, (int) count, MPI_INT32_T, MPI_SUM, comm,
                                                 MPI_INFO_NULL, &ar);
    ok = ok && MPI_SUCCESS == MPI_Bcast_init(b, (int) count, MPI_INT32_T, 0, comm,
                                             MPI_INFO_NULL, &bc);
    if (!ok) {
        goto out;
    }
    switch (how) {
    case PERS_UNSTARTED:
        ok = MPI_SUCCESS == MPI_Request_free(&ar) && MPI_SUCCESS == MPI_Request_free(&bc);
        ok = ok && MPI_REQUEST_NULL == ar && MPI_REQUEST_NULL == bc;
        break;
    case PERS_FREE_ACTIVE:
        ok = MPI_SUCCESS == MPI_Start(&ar) && MPI_SUCCESS == MPI_Start(&bc)
             && MPI_SUCCESS == MPI_Wait(&ar, MPI_STATUS_IGNORE)
             && MPI_SUCCESS == MPI_Wait(&bc, MPI_STATUS_IGNORE);
        ok = ok && pers_check(r, count, salt, size, 0) && pers_check(b, count, salt, size, 1);
        /* fresh data and poisoned outputs for the second start */
        ok = ok && pers_fill(s, r, b, count, rank, salt + 1);
        ok = ok && MPI_SUCCESS == MPI_Start(&ar) && MPI_SUCCESS == MPI_Start(&bc);
        ok = ok && MPI_SUCCESS == MPI_Request_free(&ar) && MPI_SUCCESS == MPI_Request_free(&bc);
        /* queued behind the freed requests: returns once they have ended */
        ok = ok && MPI_SUCCESS == MPI_Allreduce(s, t, (int) count, MPI_INT32_T, MPI_SUM, comm);
        ok = ok && pers_check(r, count, salt + 1, size, 0)
             && pers_check(b, count, salt + 1, size, 1) && pers_check(t, count, salt + 1, size, 0);
        break;
    default: /* PERS_COMM_FIRST */
        ok = MPI_SUCCESS == MPI_Start(&ar) && MPI_SUCCESS == MPI_Start(&bc);
        MPI_Comm_free(&comm);
        ok = ok && MPI_SUCCESS == MPI_Wait(&ar, MPI_STATUS_IGNORE)
             && MPI_SUCCESS == MPI_Wait(&bc, MPI_STATUS_IGNORE);
        ok = ok && pers_check(r, count, salt, size, 0) && pers_check(b, count, salt, size, 1);
        ok = ok && MPI_SUCCESS == MPI_Request_free(&ar) && MPI_SUCCESS == MPI_Request_free(&bc);
        break;
    }
out:
    if (MPI_REQUEST_NULL != ar) {
        MPI_Request_free(&ar);
    }
    if (MPI_REQUEST_NULL != bc) {
        MPI_Request_free(&bc);
    }
    if (MPI_COMM_NULL != comm) {
        MPI_Comm_free(&comm);
    }
    if (NULL != s) {
        dev_mem_free(s);
    }
    if (NULL != r) {
        dev_mem_free(r);
    }
    if (NULL != b) {
        dev_mem_free(b);
    }
    if (NULL != t) {
        dev_mem_free(t);
    }
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all_ok;
}

/* One allreduce and one bcast on device buffers, through the team (checked, fresh data).
 * Collective over comm and MPI_COMM_WORLD (every rank of the world calls it, once per comm it
 * belongs to: the set-up verdict is agreed over comm before each collective). */
static int use_team(MPI_Comm comm, size_t count, int salt)
{
    int32_t *host = malloc(count * sizeof(int32_t)), *got = malloc(count * sizeof(int32_t));
    void *s = NULL, *r = NULL;
    int rank, size, bad = 0, any_bad = 0, setup = 0, all_setup = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    setup = NULL != host && NULL != got;
    for (size_t i = 0; setup && i < count; ++i) {
        host[i] = (int32_t) (rank * 3 + (int) (i % 11) + salt);
    }
    setup = setup && DEV_OK == dev_mem_alloc(&s, count * sizeof(int32_t))
            && DEV_OK == dev_mem_alloc(&r, count * sizeof(int32_t))
            && DEV_OK == dev_memcpy(s, host, count * sizeof(int32_t));
    MPI_Allreduce(&setup, &all_setup, 1, MPI_INT, MPI_MIN, comm);
    if (all_setup) {
        bad |= MPI_SUCCESS != MPI_Allreduce(s, r, (int) count, MPI_INT32_T, MPI_SUM, comm);
        bad |= MPI_SUCCESS != MPI_Bcast(r, (int) count, MPI_INT32_T, 0, comm);
        bad |= DEV_OK != dev_memcpy(got, r, count * sizeof(int32_t));
        for (size_t i = 0; !bad && i < count; ++i) {
            int32_t want = 0;
            for (int q = 0; q < size; ++q) {
                want += (int32_t) (q * 3 + (int) (i % 11) + salt);
            }
            bad |= (got[i] != want);
        }
    } else {
        bad = 1;
    }
    if (NULL != s) {
        dev_mem_free(s);
    }
    if (NULL != r) {
        dev_mem_free(r);
    }
    free(host);
    free(got);
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm);
    return !any_bad;
}

/* Duplicate and split the world, use both teams, free them: one cycle. */
static int team_cycle(size_t count, int salt)
{
    MPI_Comm dup, half;
    int ok;

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &half);
    ok = use_team(dup, count, salt);
    ok = use_team(half, count, salt + 1) && ok;
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    return ok;
}

/* The driver's free memory on the current device (the context the backend made current). */
static int cuda_free_bytes(size_t *free_bytes, char *why, size_t len)
{
    typedef int (*mem_get_info_fn)(size_t *, size_t *);
    static mem_get_info_fn mem_get_info = NULL;
    size_t total = 0;
    int rc;

    if (NULL == mem_get_info) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        mem_get_info = (NULL == lib) ? NULL : (mem_get_info_fn) dlsym(lib, "cuMemGetInfo_v2");
        if (NULL == mem_get_info) {
            snprintf(why, len, "no cuMemGetInfo_v2 in libcuda.so.1: %s", dlerror());
            return 0;
        }
    }
    rc = mem_get_info(free_bytes, &total);
    if (0 != rc) {
        snprintf(why, len, "cuMemGetInfo_v2 failed (CUresult %d)", rc);
        return 0;
    }
    return 1;
}

static int run_cuda(void)
{
    char why[200] = "", diag[MT_DIAG_LEN] = "";
    size_t before = 0, after = 0;
    int ok, measured;
    long long lost;

    /* warm-up: the world's team, a first cycle (kernels loaded, the driver's own state) */
    mt_set_case("warm-up");
    ok = use_team(MPI_COMM_WORLD, COUNT, 1) && team_cycle(COUNT, 2);
    mt_check(ok, NULL, "warm-up: allreduce and bcast through the teams of world, a dup and a "
                       "split are right");

    mt_set_case("cycles");
    MPI_Barrier(MPI_COMM_WORLD);
    measured = cuda_free_bytes(&before, why, sizeof(why));
    MPI_Barrier(MPI_COMM_WORLD);
    ok = 1;
    for (int c = 0; c < CYCLES; ++c) {
        /* 1 MiB buffers: a stale mapping of a freed one holds a megabyte of the peer's */
        ok = team_cycle((1u << 20) / sizeof(int32_t) + (size_t) c, 10 + 2 * c) && ok;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    measured = cuda_free_bytes(&after, why, sizeof(why)) && measured;
    MPI_Barrier(MPI_COMM_WORLD);
    mt_check(ok, NULL, "%d cycles of dup + split + allreduce + bcast + free are right", CYCLES);

    lost = (long long) before - (long long) after;
    if (!measured) {
        mt_diag_add(diag, "%s", why);
    } else if (lost > (long long) SLACK_BYTES) {
        mt_diag_add(diag, "free device memory %.1f MiB before, %.1f MiB after: %.1f MiB lost",
                    before / MiB, after / MiB, lost / MiB);
    }
    tap_diag("rank 0: free device memory %.1f MiB before the cycles, %.1f MiB after", before / MiB,
             after / MiB);
    mt_check(measured && lost <= (long long) SLACK_BYTES, diag,
             "the GPU's free memory does not shrink over %d team cycles (allowed: %u MiB)", CYCLES,
             SLACK_BYTES >> 20);
    return mt_finish();
}

int main(int argc, char **argv)
{
    char mine[64], ctl[64], why[300];
    int ok, left, ctl_left, rc;

    snprintf(mine, sizeof(mine), "collgpu-%d-", (int) getpid());
    snprintf(ctl, sizeof(ctl), "collgpu-ctl-%d-", (int) getpid());
    mt_init(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (DEV_BACKEND_CUDA == dev_backend()) {
        return run_cuda();
    }

    mt_set_case("teams");
    ok = use_team(MPI_COMM_WORLD, COUNT, 1) && team_cycle(COUNT, 2);
    {
        int stale_before, stale_after;
        MPI_Barrier(MPI_COMM_WORLD);
        stale_before = count_stale_peer_maps(mine);
        for (int c = 0; c < 8; ++c) {
            /* growing by pages: a freed buffer's address is not handed back for the next */
            ok = team_cycle(COUNT + (size_t) c * 4096, 20 + 2 * c) && ok;
        }
        MPI_Barrier(MPI_COMM_WORLD); /* every peer has freed its buffers and teams */
        stale_after = count_stale_peer_maps(mine);
        mt_check(0 <= stale_before && stale_after <= stale_before, NULL,
                 "mappings of peers' freed allocations do not grow over 8 team cycles (%d before, "
                 "%d after)", stale_before, stale_after);
    }
    /* persistent requests of the team's path release the communicator, its team, scratch and
     * mappings however they go (coll_gpu_engine.c: end_state) */
    {
        static const char *const hows[] = {"freed before their first start",
                                           "freed while active in their second start",
                                           "whose communicator was freed first"};
        for (int how = PERS_UNSTARTED; how <= PERS_COMM_FIRST; ++how) {
            char diag[MT_DIAG_LEN] = "";
            live_t before, after;
            int right;

            mt_set_case(hows[how]);
            MPI_Barrier(MPI_COMM_WORLD);
            count_live(mine, &before);
            MPI_Barrier(MPI_COMM_WORLD);
            right = pers_case(how, COUNT, 40 + 2 * how);
            MPI_Barrier(MPI_COMM_WORLD); /* every peer has freed its team */
            count_live(mine, &after);
            mt_check(right, NULL, "persistent allreduce and bcast %s: results right", hows[how]);
            if (after.own != before.own || after.ctl != before.ctl || after.peer > before.peer) {
                mt_diag_add(diag, "own allocations %d -> %d, control block mappings %d -> %d, "
                            "peer mappings %d -> %d", before.own, after.own, before.ctl,
                            after.ctl, before.peer, after.peer);
            }
            mt_check(0 <= before.own && after.own == before.own && after.ctl == before.ctl
                         && after.peer <= before.peer,
                     diag, "persistent requests %s leave no team, scratch or mapping behind",
                     hows[how]);
        }
    }
    /* the communicators of team_cycle are freed; these two stay until MPI_Finalize */
    {
        MPI_Comm dup, half;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &half);
        ok = use_team(dup, COUNT, 3) && use_team(half, COUNT, 4) && ok;
        mt_check(ok, NULL,
                 "allreduce and bcast through the teams of world, dups and splits are right");
        mt_check(0 == count_shm(ctl), NULL, "no control block name is left once the teams are "
                                            "set up");
        MPI_Comm_free(&dup);
        MPI_Comm_free(&half);
    }
    snprintf(mt_case_name, sizeof(mt_case_name), "%s", "(MPI_Finalize)");
    MPI_Finalize();
    /* a rank that finds its own leak exits 1, and mpirun then ends this one */
    snprintf(mt_case_name, sizeof(mt_case_name), "%s",
             "after MPI_Finalize (another rank found allocations left and exited 1?)");

    /* Counted while this test still holds the backend open: its last dev_close() would remove
     * any leftover allocation itself and hide a leak.  Each rank checks its own files; rank 0
     * reports its own, and every rank's exit status says its own verdict. */
    left = count_shm(mine);
    ctl_left = count_shm(ctl);
    dev_close();
    tap_ok(0 == left, "after MPI_Finalize no device allocation of this process is left (%d)", left);
    tap_ok(0 == ctl_left, "and no control block (%d)", ctl_left);
    rc = tap_done();
    return (0 == left && 0 == ctl_left) ? rc : 1;
}
