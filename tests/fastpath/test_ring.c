/*
 * test_ring.c - the ring allreduce and the chain bcast follow the node model's ring, and every
 * rank agrees on it.  Four ranks on four emulated GPUs (rank r on device r, chosen before
 * MPI_Init), and a topology file that rank 0 writes before the team is built: NVLink between
 * GPUs 0-2 and 1-3, the CPU between every other pair, so the best ring is not 0 1 2 3.  The
 * script (ring.sh) checks from the log that every rank took the same ring and that it is the
 * model's; this program checks the results.  On the cuda backend (gpu/ring_cuda.sh) the four
 * ranks share the machine's GPUs (local rank % GPUs) and the model is the probed one: the
 * results and the agreement on one ring are checked, not a fixture's ring.  Exit: TAP.
 */
#include "mpi/mpitest.h"

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

/* Allocate a device buffer of bytes and copy host bytes in (when host is not NULL); the
 * verdict is this rank's alone. */
static int dev_buffer(void **buf, const void *host, size_t bytes)
{
    return DEV_OK == dev_mem_alloc(buf, bytes)
           && (NULL == host || DEV_OK == dev_memcpy(*buf, host, bytes));
}

static int check_allreduce(int inplace)
{
    int32_t *host = malloc(COUNT * sizeof(int32_t));
    void *sbuf = NULL, *rbuf = NULL;
    int ok, bad = 0;
    char diag[MT_DIAG_LEN] = "";

    ok = NULL != host;
    for (int i = 0; ok && i < COUNT; ++i) {
        host[i] = (rank + 1) * (i % 1013) + 7;
    }
    ok = ok && dev_buffer(&sbuf, inplace ? NULL : host, COUNT * sizeof(int32_t))
         && dev_buffer(&rbuf, inplace ? host : NULL, COUNT * sizeof(int32_t));
    /* every rank enters the collective, or none */
    if (!mt_agree(ok)) {
        mt_diag_add(diag, "buffer set-up failed on some rank (here: %s)",
                    ok ? "no" : dev_error_string());
        bad = 1;
    } else if (MPI_SUCCESS != MPI_Allreduce(inplace ? MPI_IN_PLACE : sbuf, rbuf, COUNT,
                                            MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD)
               || DEV_OK != dev_memcpy(host, rbuf, COUNT * sizeof(int32_t))) {
        mt_diag_add(diag, "MPI_Allreduce or the copy back failed");
        bad = 1;
    }
    for (int i = 0; i < COUNT && !bad; ++i) {
        int32_t want = (int32_t) (size * (size + 1) / 2 * (i % 1013) + 7 * size);
        if (host[i] != want) {
            mt_diag_add(diag, "element %d is %d, want %d", i, host[i], want);
            bad = 1;
        }
    }
    if (NULL != sbuf) {
        dev_mem_free(sbuf);
    }
    if (NULL != rbuf) {
        dev_mem_free(rbuf);
    }
    free(host);
    return mt_check(!bad, diag, "ring allreduce%s of %d int32 on 4 ranks is right",
                    inplace ? " in place" : "", COUNT);
}

static int check_bcast(int root)
{
    unsigned char *host = malloc(BYTES);
    void *buf = NULL;
    int ok, bad = 0;
    char diag[MT_DIAG_LEN] = "";

    ok = NULL != host;
    for (size_t i = 0; ok && i < BYTES; ++i) {
        host[i] = (unsigned char) (rank == root ? (i * 31 + 5) : 0xee);
    }
    ok = ok && dev_buffer(&buf, host, BYTES);
    if (!mt_agree(ok)) {
        mt_diag_add(diag, "buffer set-up failed on some rank (here: %s)",
                    ok ? "no" : dev_error_string());
        bad = 1;
    } else if (MPI_SUCCESS != MPI_Bcast(buf, BYTES, MPI_BYTE, root, MPI_COMM_WORLD)
               || DEV_OK != dev_memcpy(host, buf, BYTES)) {
        mt_diag_add(diag, "MPI_Bcast or the copy back failed");
        bad = 1;
    }
    for (size_t i = 0; i < BYTES && !bad; ++i) {
        if (host[i] != (unsigned char) (i * 31 + 5)) {
            mt_diag_add(diag, "byte %zu is %d", i, host[i]);
            bad = 1;
        }
    }
    if (NULL != buf) {
        dev_mem_free(buf);
    }
    free(host);
    return mt_check(!bad, diag, "chain bcast of %d B from rank %d is right", BYTES, root);
}

int main(int argc, char **argv)
{
    const char *topo = getenv("OMPI_MCA_coll_gpu_topo_file");
    const char *lrank = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int emulated =
        DEV_BACKEND_EMULATED == dev_backend_from_name(getenv("OMPI_MCA_coll_gpu_device"));
    int ndev = 0, ok = 1, all_ok = 0;
    char why[300];

    /* emulated: the device is chosen before MPI_Init, as an application does; the component's
     * own dev_open only counts a reference on the same backend.  cuda: mt_device_open picks
     * GPU (local rank % GPUs) after MPI_Init, before the first collective builds the team. */
    if (emulated) {
        ok = DEV_OK == dev_open(DEV_BACKEND_EMULATED) && DEV_OK == dev_device_count(&ndev)
             && NULL != lrank && DEV_OK == dev_set_device(atoi(lrank) % ndev);
    }
    mt_init(&argc, &argv);
    rank = mt_rank;
    size = mt_size;
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (4 != size) {
        mt_skip_all("needs 4 ranks");
    }
    if (emulated && (!all_ok || NULL == topo || 4 != ndev)) {
        /* ring.sh sets all three: without them this is a broken set-up, not a skip */
        if (0 == rank) {
            printf("Bail out! the emulated run needs COLL_GPU_EMULATED_DEVICES=4, "
                   "coll_gpu_topo_file and a local rank (%d devices, topo file %s, set-up %s)\n",
                   ndev, NULL != topo ? topo : "unset", all_ok ? "ok" : "failed");
        }
        MPI_Finalize();
        return TAP_HARD_ERROR_EXIT;
    }
    if (emulated && 0 == rank) {
        write_topo(topo, ndev);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the file exists before the first device call reads it */
    check_allreduce(0);
    check_allreduce(1);
    check_bcast(0);
    check_bcast(2);
    ok = mt_finish();
    if (emulated) {
        dev_close(); /* the reference taken before MPI_Init */
    }
    return ok;
}
