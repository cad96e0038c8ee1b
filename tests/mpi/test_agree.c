/*
 * test_agree.c - ULFM's agreement (MPIX_Comm_agree, MPIX_Comm_iagree; Open MPI 5.0 with fault
 * tolerance enabled: mpirun --with-ft ulfm) under a component list that leaves its slots empty
 * (--mca coll gpu,tuned): coll/gpu's gap filling must give them coll/ftagree's functions.
 * Without that, MPIX_Comm_agree calls an empty slot and the process dies of SIGSEGV.
 *
 * Cases: the agreed value is the bitwise AND of every rank's flag, on MPI_COMM_WORLD, on a dup
 * of it and on MPI_COMM_SELF, blocking and nonblocking, with flags that differ by rank.
 */
#include "mpitest.h"

#include <mpi-ext.h>

#ifndef OMPI_HAVE_MPI_EXT_FTMPI
int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    mt_skip_all("this Open MPI has no ULFM extension (mpi-ext.h: OMPI_HAVE_MPI_EXT_FTMPI)");
    return 0;
}
#else
/* Every rank's flag: all bits set but bit rank % 30, and bit 30 only on rank 0. */
static int flag_of(int rank)
{
    return (0x3FFFFFFF & ~(1 << (rank % 30))) | (0 == rank ? 0x40000000 : 0);
}

static void one(MPI_Comm comm, const char *name, int nonblocking)
{
    char diag[MT_DIAG_LEN] = "";
    int size, rank, flag, expected = ~0, rc;

    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    for (int r = 0; r < size; ++r) {
        expected &= flag_of(r);
    }
    flag = flag_of(rank);
    if (nonblocking) {
        MPI_Request req = MPI_REQUEST_NULL;
        rc = MPIX_Comm_iagree(comm, &flag, &req);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    } else {
        rc = MPIX_Comm_agree(comm, &flag);
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s: %s", nonblocking ? "MPIX_Comm_iagree" : "MPIX_Comm_agree",
                    mt_mpi_error(rc));
    } else if (flag != expected) {
        mt_diag_add(diag, "agreed 0x%x, expected 0x%x", flag, expected);
    }
    mt_check('\0' == diag[0], diag, "%s on %s (%d ranks): the AND of every rank's flag",
             nonblocking ? "MPIX_Comm_iagree" : "MPIX_Comm_agree", name, size);
}

int main(int argc, char **argv)
{
    MPI_Comm dup;

    mt_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int nb = 0; nb < 2; ++nb) {
        mt_set_case(nb ? "iagree" : "agree");
        one(MPI_COMM_WORLD, "MPI_COMM_WORLD", nb);
        one(dup, "a dup of MPI_COMM_WORLD", nb);
        one(MPI_COMM_SELF, "MPI_COMM_SELF", nb);
    }
    MPI_Comm_free(&dup);
    return mt_finish();
}
#endif
