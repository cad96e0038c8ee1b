/*
 * test_ring.c - the ring allreduce and the chain bcast follow the node model's ring, and every
 * rank agrees on it.  Four ranks on four emulated GPUs (rank r on device r, chosen before
 * MPI_Init), and a topology file that rank 0 writes before the team is built: NVLink between
 * GPUs 0-2 and 1-3, the CPU between every other pair, so the best ring is not 0 1 2 3.  The
 * script (ring.sh) checks from the log that every rank took the same ring and that it is the
 * model's; this program checks the results.  Exit: TAP.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "tap.h"

#define COUNT 100003 /* uneven ring chunks */
#define BYTES (3 * 1024 * 1024 + 5)

static int rank, size;

static void write_topo(const char *path, int ndev)
{
    FILE *f = fopen(path, "w");
    if (NULL == f) {
        return;
    }
    fprintf(f, "coll_gpu_topo 1\nhost emulated\nsource \"test_ring.c\"\n");
    for (int g = 0; g < ndev; ++g) {
        dev_uuid_t u;
        const uint8_t *b = u.bytes;
        dev_device_uuid(g, &u);
        fprintf(f,
                "gpu %d uuid=GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                "%02x%02x%02x%02x%02x%02x bus=0000:%02x:00.0 name=\"emulated\"\n",
                g, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                b[12], b[13], b[14], b[15], g);
    }
    for (int a = 0; a < ndev; ++a) {
        for (int c = a + 1; c < ndev; ++c) {
            fprintf(f, "link %d %d %s p2p=yes\n", a, c, (c - a == 2) ? "NV4" : "PHB");
        }
    }
    fprintf(f, "end\n");
    fclose(f);
}

static int check_allreduce(int inplace)
{
    int32_t *host = malloc(COUNT * sizeof(int32_t)), *sbuf = NULL, *rbuf = NULL;
    int bad = -1, any_bad = 1;

    for (int i = 0; i < COUNT; ++i) {
        host[i] = (rank + 1) * (i % 1013) + 7;
    }
    if (DEV_OK == dev_mem_alloc((void **) &sbuf, COUNT * sizeof(int32_t))
        && DEV_OK == dev_mem_alloc((void **) &rbuf, COUNT * sizeof(int32_t))
        && DEV_OK == dev_memcpy(inplace ? rbuf : sbuf, host, COUNT * sizeof(int32_t))
        && MPI_SUCCESS == MPI_Allreduce(inplace ? MPI_IN_PLACE : (void *) sbuf, rbuf, COUNT,
                                        MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD)
        && DEV_OK == dev_memcpy(host, rbuf, COUNT * sizeof(int32_t))) {
        bad = 0;
        for (int i = 0; i < COUNT && !bad; ++i) {
            int32_t want = (int32_t) (size * (size + 1) / 2 * (i % 1013) + 7 * size);
            if (host[i] != want) {
                tap_diag("rank %d: element %d is %d, want %d", rank, i, host[i], want);
                bad = 1;
            }
        }
    }
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    dev_mem_free(sbuf);
    dev_mem_free(rbuf);
    free(host);
    return 0 == any_bad;
}

static int check_bcast(int root)
{
    unsigned char *host = malloc(BYTES), *buf = NULL;
    int bad = -1, any_bad = 1;

    for (size_t i = 0; i < BYTES; ++i) {
        host[i] = (unsigned char) (rank == root ? (i * 31 + 5) : 0xee);
    }
    if (DEV_OK == dev_mem_alloc((void **) &buf, BYTES) && DEV_OK == dev_memcpy(buf, host, BYTES)
        && MPI_SUCCESS == MPI_Bcast(buf, BYTES, MPI_BYTE, root, MPI_COMM_WORLD)
        && DEV_OK == dev_memcpy(host, buf, BYTES)) {
        bad = 0;
        for (size_t i = 0; i < BYTES && !bad; ++i) {
            if (host[i] != (unsigned char) (i * 31 + 5)) {
                tap_diag("rank %d: byte %zu is %d", rank, i, host[i]);
                bad = 1;
            }
        }
    }
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    dev_mem_free(buf);
    free(host);
    return 0 == any_bad;
}

int main(int argc, char **argv)
{
    const char *topo = getenv("OMPI_MCA_coll_gpu_topo_file");
    const char *lrank = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int ndev = 0, ok;

    /* the device is chosen before MPI_Init, as an application does; the component's own
     * dev_open only counts a reference on the same backend */
    ok = DEV_OK == dev_open(DEV_BACKEND_EMULATED) && DEV_OK == dev_device_count(&ndev)
         && NULL != lrank && DEV_OK == dev_set_device(atoi(lrank) % ndev);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_set_quiet(0 != rank);
    if (!ok || NULL == topo || 4 != ndev || 4 != size) {
        tap_skip_all("needs 4 ranks, COLL_GPU_EMULATED_DEVICES=4 and coll_gpu_topo_file");
    }
    if (0 == rank) {
        write_topo(topo, ndev);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the file exists before the first device call reads it */
    tap_plan(4);
    tap_ok(check_allreduce(0), "ring allreduce of %d int32 on 4 GPUs is right", COUNT);
    tap_ok(check_allreduce(1), "ring allreduce in place is right");
    tap_ok(check_bcast(0), "chain bcast of %d B from rank 0 is right", BYTES);
    tap_ok(check_bcast(2), "chain bcast of %d B from rank 2 is right", BYTES);
    MPI_Finalize();
    return tap_done();
}
