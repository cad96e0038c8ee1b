/*
 * test_tuned.c - MPI under `--mca coll gpu,tuned` (the design card's command line).
 *
 * tuned provides no nonblocking and no neighborhood collectives, and Open MPI refuses to
 * start when a coll slot stays empty; coll/gpu must fill those gaps.  So with exactly
 * gpu,tuned every kind of collective must work: MPI_Init itself, a blocking MPI_Allreduce,
 * MPI_Iallreduce + MPI_Wait, MPI_Ibarrier, MPI_Ibcast, MPI_Neighbor_allgather and
 * MPI_Ineighbor_allgather on a periodic cartesian communicator, and collectives on
 * MPI_COMM_SELF, and MPI_Intercomm_create with a blocking and a nonblocking collective on the
 * intercommunicator (tuned serves none: coll/gpu fills them from coll/inter, basic and libnbc;
 * test_inter.c covers every intercommunicator collective), and a device-buffer MPI_Allreduce
 * (skipped, with its reason, only where the backend is cuda and no GPU is there to require it).
 * Run by coll_gpu_tuned.sh with COLL_GPU_TEST_COLL=gpu,tuned.
 */
#include "mpitest.h"

#define N 517

/* Value i of rank r's input. */
static int32_t val(int r, int i)
{
    return (int32_t) ((r + 1) * 1000 + (i * 7919) % 997);
}

static int check_sum(const int32_t *got, int n, int size, char *diag)
{
    for (int i = 0; i < n; ++i) {
        int32_t e = 0;
        for (int r = 0; r < size; ++r) {
            e += val(r, i);
        }
        if (got[i] != e) {
            mt_diag_add(diag, "element %d: expected %d got %d", i, e, got[i]);
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    int32_t in[N], out[N];
    char diag[MT_DIAG_LEN], why[300];
    int rc, ok;
    MPI_Request req;

    mt_init(&argc, &argv);
    {
        /* MPI_Init returned (it aborts on failure); what there is to check is that coll/gpu
         * is part of it when the coll list names it: its MCA parameters are registered (and so
         * visible as MPI_T control variables) only when the component was opened here */
        const char *coll = getenv("OMPI_MCA_coll");
        int provided = 0, index = -1, initialized = 0, mpit = 0;
        diag[0] = '\0';
        MPI_Initialized(&initialized);
        mpit = initialized && MPI_SUCCESS == MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
        ok = mpit;
        if (!mpit) {
            mt_diag_add(diag, "MPI_Initialized says %d, or MPI_T_init_thread failed", initialized);
        } else if (NULL != coll && NULL != strstr(coll, "gpu")
                   && MPI_SUCCESS != MPI_T_cvar_get_index("coll_gpu_priority", &index)) {
            mt_diag_add(diag, "no MPI_T control variable coll_gpu_priority: coll/gpu was not "
                              "opened");
            ok = 0;
        }
        if (mpit) {
            MPI_T_finalize();
        }
        tap_diag("%d ranks, coll components: %s", mt_size, coll ? coll : "(default)");
        mt_check(ok, diag, "MPI_Init under --mca coll %s%s", coll ? coll : "(default)",
                 (NULL != coll && NULL != strstr(coll, "gpu")) ? ": coll/gpu is loaded" : "");
    }
    for (int i = 0; i < N; ++i) {
        in[i] = val(mt_rank, i);
    }

    mt_set_case("MPI_Allreduce");
    diag[0] = '\0';
    memset(out, 0xA5, sizeof(out));
    rc = MPI_Allreduce(in, out, N, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    ok = MPI_SUCCESS == rc && check_sum(out, N, mt_size, diag);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s", mt_mpi_error(rc));
    }
    mt_check(ok, diag, "MPI_Allreduce (blocking) int32 sum, host buffers");

    mt_set_case("MPI_Iallreduce");
    diag[0] = '\0';
    memset(out, 0xA5, sizeof(out));
    rc = MPI_Iallreduce(in, out, N, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, &req);
    if (MPI_SUCCESS == rc) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    ok = MPI_SUCCESS == rc && check_sum(out, N, mt_size, diag);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s", mt_mpi_error(rc));
    }
    mt_check(ok, diag, "MPI_Iallreduce + MPI_Wait int32 sum");

    mt_set_case("MPI_Ibarrier");
    diag[0] = '\0';
    rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (MPI_SUCCESS == rc) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s", mt_mpi_error(rc));
    }
    mt_check(MPI_SUCCESS == rc, diag, "MPI_Ibarrier + MPI_Wait");

    mt_set_case("MPI_Ibcast");
    diag[0] = '\0';
    memcpy(out, in, sizeof(out));
    rc = MPI_Ibcast(out, N, MPI_INT32_T, 0, MPI_COMM_WORLD, &req);
    if (MPI_SUCCESS == rc) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    ok = MPI_SUCCESS == rc;
    for (int i = 0; ok && i < N; ++i) {
        if (out[i] != val(0, i)) {
            mt_diag_add(diag, "element %d: expected %d got %d", i, val(0, i), out[i]);
            ok = 0;
        }
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s", mt_mpi_error(rc));
    }
    mt_check(ok, diag, "MPI_Ibcast + MPI_Wait int32 root=0");

    /* Neighborhood collectives on a periodic 2-D grid (1-D when the size is prime). */
    {
        int dims[2] = {0, 0}, periods[2] = {1, 1}, nb[4], got[4], mine, crank = -1;
        MPI_Comm cart = MPI_COMM_NULL;
        for (int blocking = 1; blocking >= 0; --blocking) {
            mt_set_case(blocking ? "MPI_Neighbor_allgather" : "MPI_Ineighbor_allgather");
            diag[0] = '\0';
            ok = 1;
            if (MPI_COMM_NULL == cart) {
                MPI_Dims_create(mt_size, 2, dims);
                rc = MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
                if (MPI_SUCCESS != rc) {
                    mt_diag_add(diag, "MPI_Cart_create: %s", mt_mpi_error(rc));
                    ok = 0;
                    cart = MPI_COMM_NULL;
                } else {
                    MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN);
                    MPI_Comm_rank(cart, &crank);
                    /* neighbor order: per dimension, the source (-1) then the destination (+1) */
                    MPI_Cart_shift(cart, 0, 1, &nb[0], &nb[1]);
                    MPI_Cart_shift(cart, 1, 1, &nb[2], &nb[3]);
                }
            }
            if (ok) {
                mine = 100 + crank;
                memset(got, 0xA5, sizeof(got));
                if (blocking) {
                    rc = MPI_Neighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, cart);
                } else {
                    rc = MPI_Ineighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, cart, &req);
                    if (MPI_SUCCESS == rc) {
                        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
                    }
                }
                if (MPI_SUCCESS != rc) {
                    mt_diag_add(diag, "%s", mt_mpi_error(rc));
                    ok = 0;
                }
                for (int i = 0; ok && i < 4; ++i) {
                    if (got[i] != 100 + nb[i]) {
                        mt_diag_add(diag, "neighbor %d: expected %d got %d", i, 100 + nb[i],
                                    got[i]);
                        ok = 0;
                    }
                }
            }
            mt_check(ok, diag, "%s on a %dx%d periodic cartesian communicator",
                     blocking ? "MPI_Neighbor_allgather" : "MPI_Ineighbor_allgather + MPI_Wait",
                     dims[0], dims[1]);
        }
        if (MPI_COMM_NULL != cart) {
            MPI_Comm_free(&cart);
        }
    }

    mt_set_case("MPI_COMM_SELF");
    diag[0] = '\0';
    memset(out, 0xA5, sizeof(out));
    rc = MPI_Allreduce(in, out, N, MPI_INT32_T, MPI_SUM, MPI_COMM_SELF);
    ok = MPI_SUCCESS == rc && 0 == memcmp(in, out, sizeof(in));
    if (MPI_SUCCESS == rc) {
        rc = MPI_Bcast(out, N, MPI_INT32_T, 0, MPI_COMM_SELF);
    }
    if (MPI_SUCCESS == rc) {
        rc = MPI_Barrier(MPI_COMM_SELF);
    }
    if (MPI_SUCCESS == rc) {
        rc = MPI_Iallreduce(MPI_IN_PLACE, out, N, MPI_INT32_T, MPI_SUM, MPI_COMM_SELF, &req);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    }
    ok = ok && MPI_SUCCESS == rc && 0 == memcmp(in, out, sizeof(in));
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s", mt_mpi_error(rc));
    } else if (!ok) {
        mt_diag_add(diag, "result differs from the input");
    }
    mt_check(ok, diag, "MPI_Allreduce, MPI_Bcast, MPI_Barrier, MPI_Iallreduce on MPI_COMM_SELF");

    /* An intercommunicator: even against odd ranks (needs 2 ranks at least). */
    if (2 <= mt_size) {
        MPI_Comm local = MPI_COMM_NULL, ic = MPI_COMM_NULL;
        int color = mt_rank % 2, lr = 0;
        int32_t got = 0, want = 0;

        mt_set_case("intercommunicator");
        diag[0] = '\0';
        rc = MPI_Comm_split(MPI_COMM_WORLD, color, mt_rank, &local);
        if (MPI_SUCCESS == rc) {
            /* each group's leader is its lowest world rank: 0 and 1 */
            rc = MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 99, &ic);
        }
        if (MPI_SUCCESS == rc) {
            MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
            MPI_Comm_rank(ic, &lr);
            /* the sum of the remote group's world ranks + 1 */
            int32_t mine = mt_rank + 1;
            rc = MPI_Allreduce(&mine, &got, 1, MPI_INT32_T, MPI_SUM, ic);
            for (int r = 1 - color; r < mt_size; r += 2) {
                want += r + 1;
            }
            if (MPI_SUCCESS == rc && got != want) {
                mt_diag_add(diag, "MPI_Allreduce: expected %d got %d ", want, got);
            }
        }
        if (MPI_SUCCESS == rc) {
            /* group 0's rank 0 broadcasts to group 1 */
            int32_t b = (0 == color && 0 == lr) ? 4242 : -1;
            int root = (0 == color) ? ((0 == lr) ? MPI_ROOT : MPI_PROC_NULL) : 0;
            rc = MPI_Ibcast(&b, 1, MPI_INT32_T, root, ic, &req);
            if (MPI_SUCCESS == rc) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            if (MPI_SUCCESS == rc && b != ((0 == color && 0 != lr) ? -1 : 4242)) {
                mt_diag_add(diag, "MPI_Ibcast: got %d ", b);
            }
        }
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "%s", mt_mpi_error(rc));
        }
        ok = MPI_SUCCESS == rc && '\0' == diag[0];
        mt_check(ok, diag, "MPI_Intercomm_create (even/odd), MPI_Allreduce and MPI_Ibcast on it");
        if (MPI_COMM_NULL != ic) {
            MPI_Comm_free(&ic);
        }
        if (MPI_COMM_NULL != local) {
            MPI_Comm_free(&local);
        }
    }

    /* A device-buffer allreduce under gpu,tuned.  mt_device_open ends the program where the
     * device must open (emulated; cuda on a GPU machine); elsewhere (cuda without a GPU) the
     * case is skipped, by name and with the reason, never left out silently. */
    if (mt_device_open(why, sizeof(why))) {
        void *d = mt_mem_alloc(MT_MEM_DEVICE, sizeof(in));
        mt_set_case("device MPI_Allreduce");
        diag[0] = '\0';
        ok = NULL != d && 0 == mt_mem_put(MT_MEM_DEVICE, d, in, sizeof(in));
        /* every rank enters the collective, or none */
        if (!mt_agree(ok)) {
            mt_diag_add(diag, "device buffer set-up failed on some rank (here: %s)",
                        ok ? "no" : dev_error_string());
            ok = 0;
        } else {
            rc = MPI_Allreduce(MPI_IN_PLACE, d, N, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
            if (MPI_SUCCESS != rc) {
                mt_diag_add(diag, "%s", mt_mpi_error(rc));
                ok = 0;
            }
        }
        memset(out, 0xA5, sizeof(out));
        ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, out, d, sizeof(out)) &&
             check_sum(out, N, mt_size, diag);
        mt_check(ok, diag, "MPI_Allreduce in place on device buffers (%s)", mt_device_name());
        mt_mem_free(MT_MEM_DEVICE, d);
    } else {
        tap_skip(why, "MPI_Allreduce in place on device buffers (%s)", mt_device_name());
    }
    return mt_finish();
}
