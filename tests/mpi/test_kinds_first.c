/*
 * test_kinds_first.c - ranks that pass different kinds of memory in one call, under coll/gpu's
 * defaults (coll_gpu_uniform_buffers=true), the way MPICH's test suite runs its collective tests
 * with `-evenmemtype=device -oddmemtype=host`: every rank keeps one kind of memory for the whole
 * run, chosen by the parity of its rank.  The first blocking allreduce or bcast on a
 * communicator agrees on the kind; a communicator where it found kinds mixed agrees on every
 * blocking call after; its nonblocking ones read every rank's note from progress
 * (coll_gpu_defer.c), find the kinds mixed too and are staged.  A nonblocking call before the
 * communicator's first blocking one has no shared block to note on: it is staged (MPICH's
 * nonblocking tests start that way).  Before these rules such a program hung: a device rank
 * entered the node team while a host rank went straight to the component below.
 *
 * Usage: test_kinds_first EVEN ODD   (each one of host, pinned, device, managed)
 *
 * Cases, each on fresh communicators (MPI_Comm_dup of world, a split that reverses the rank
 * order, and a dup of world that is itself dup'ed before its first call: Open MPI's own
 * iallreduce on it takes no part in the check), each communicator's first allreduce or bcast
 * being the named one:
 *   first-allreduce, first-bcast-0, first-bcast-last, first-iallreduce, first-ibcast-last
 *   (the last two: the nonblocking call comes first, the next blocking one agrees)
 * then, on the same communicator, a sequence of allreduce (in place and not), bcast from every
 * root, iallreduce and ibcast, at 1, 1000 and 70000 ints.  Every call runs on fresh random data
 * into a poisoned output and is compared with a reference computed here.  A hang is reported by
 * the case's alarm (mpitest.h).
 */
#include "mpitest.h"


#define POISON ((int32_t) 0x5a5a5a5a)
#define MAX_COUNT 70000

static mt_kind_t my_kind; /* mpitest.h: host, pinned, device or managed here */
static uint64_t round_no = 0;

/* One of the kinds the usage names (mpitest.h's, pool aside), or -1. */
static int kind_of(const char *s)
{
    for (int k = 0; k < MT_KIND_COUNT; ++k) {
        if (MT_KIND_POOL != k && 0 == strcmp(s, mt_kind_names[k])) {
            return k;
        }
    }
    return -1;
}

/* dev_memcpy copies between any kinds; host code never touches device memory. */
static int put(void *dst, const int32_t *src, size_t n)
{
    return DEV_OK == dev_memcpy(dst, src, n * sizeof(int32_t)) ? 0 : -1;
}

static int get(int32_t *dst, const void *src, size_t n)
{
    return DEV_OK == dev_memcpy(dst, src, n * sizeof(int32_t)) ? 0 : -1;
}

/* The input of world rank r at index i in this round: small, never zero, never repeating. */
static int32_t value(int r, size_t i)
{
    uint64_t z = round_no * 0x9e3779b97f4a7c15ULL + (uint64_t) r * 0xbf58476d1ce4e5b9ULL + i;
    z ^= z >> 31;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 29;
    {
        int32_t v = (int32_t) (z % 2000) - 1000;
        return v >= 0 ? v + 1 : v; /* -1000 .. -1, 1 .. 1000 */
    }
}

typedef enum { C_ALLREDUCE, C_ALLREDUCE_INPLACE, C_BCAST, C_IALLREDUCE, C_IBCAST } coll_t;
static const char *const coll_names[] = {"allreduce", "allreduce in place", "bcast",
                                         "iallreduce", "ibcast"};

/* One call on comm (whose rank i is world rank world_of[i]); 1 when this rank's result is
 * right. */
static int one_call(MPI_Comm comm, const int *world_of, coll_t c, int root, size_t n,
                    int32_t *host_in, int32_t *want, int32_t *got, char *diag)
{
    int rank, size, rc, ok = 1;
    void *sbuf = mt_kind_alloc(my_kind, n * sizeof(int32_t)),
         *rbuf = mt_kind_alloc(my_kind, n * sizeof(int32_t));
    MPI_Request req = MPI_REQUEST_NULL;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ++round_no;
    for (size_t i = 0; i < n; ++i) {
        host_in[i] = value(mt_rank, i);
        got[i] = POISON;
    }
    if (NULL == sbuf || NULL == rbuf || 0 != put(sbuf, host_in, n) || 0 != put(rbuf, got, n)) {
        mt_diag_add(diag, "%s: buffers of %zu ints could not be set up; ", coll_names[c], n);
        ok = 0;
    }
    if (!mt_agree(ok)) {
        mt_kind_free(my_kind, sbuf);
        mt_kind_free(my_kind, rbuf);
        return 0;
    }
    if (C_BCAST == c || C_IBCAST == c) {
        void *buf = (rank == root) ? sbuf : rbuf;
        for (size_t i = 0; i < n; ++i) {
            want[i] = value(world_of[root], i);
        }
        rc = (C_BCAST == c) ? MPI_Bcast(buf, (int) n, MPI_INT, root, comm)
                            : MPI_Ibcast(buf, (int) n, MPI_INT, root, comm, &req);
        if (MPI_SUCCESS == rc && C_IBCAST == c) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        if (MPI_SUCCESS == rc && 0 != get(got, buf, n)) {
            mt_diag_add(diag, "%s: cannot read the result back; ", coll_names[c]);
            ok = 0;
        }
    } else {
        for (size_t i = 0; i < n; ++i) {
            int32_t s = 0;
            for (int p = 0; p < size; ++p) {
                s += value(world_of[p], i);
            }
            want[i] = s;
        }
        if (C_ALLREDUCE_INPLACE == c) {
            rc = put(rbuf, host_in, n);
            if (0 == rc) {
                rc = MPI_Allreduce(MPI_IN_PLACE, rbuf, (int) n, MPI_INT, MPI_SUM, comm);
            }
        } else if (C_ALLREDUCE == c) {
            rc = MPI_Allreduce(sbuf, rbuf, (int) n, MPI_INT, MPI_SUM, comm);
        } else {
            rc = MPI_Iallreduce(sbuf, rbuf, (int) n, MPI_INT, MPI_SUM, comm, &req);
            if (MPI_SUCCESS == rc) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        }
        if (MPI_SUCCESS == rc && 0 != get(got, rbuf, n)) {
            mt_diag_add(diag, "%s: cannot read the result back; ", coll_names[c]);
            ok = 0;
        }
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s of %zu ints (root %d): %s; ", coll_names[c], n, root,
                    mt_mpi_error(rc));
        ok = 0;
    } else if (ok) {
        for (size_t i = 0; i < n; ++i) {
            if (got[i] != want[i]) {
                mt_diag_add(diag, "%s of %zu ints (root %d): [%zu] = %d, want %d; ",
                            coll_names[c], n, root, i, got[i], want[i]);
                ok = 0;
                break;
            }
        }
    }
    mt_kind_free(my_kind, sbuf);
    mt_kind_free(my_kind, rbuf);
    return ok;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {1, 1000, MAX_COUNT};
    static const struct {
        const char *name;
        coll_t c;
        int root_last;
    } firsts[] = {{"first-allreduce", C_ALLREDUCE, 0},
                  {"first-bcast-0", C_BCAST, 0},
                  {"first-bcast-last", C_BCAST, 1},
                  {"first-iallreduce", C_IALLREDUCE, 0},
                  {"first-ibcast-last", C_IBCAST, 1}};
    int32_t *in, *want, *got;
    char why[256];
    int kinds[2];

    mt_init(&argc, &argv);
    if (argc != 3 || (kinds[0] = kind_of(argv[1])) < 0 || (kinds[1] = kind_of(argv[2])) < 0) {
        if (0 == mt_rank) {
            fprintf(stderr, "usage: test_kinds_first EVEN ODD (host, pinned, device, managed)\n");
        }
        MPI_Finalize();
        return 2;
    }
    my_kind = (mt_kind_t) kinds[mt_rank % 2];
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    in = malloc(MAX_COUNT * sizeof(int32_t));
    want = malloc(MAX_COUNT * sizeof(int32_t));
    got = malloc(MAX_COUNT * sizeof(int32_t));

    for (size_t f = 0; f < sizeof(firsts) / sizeof(firsts[0]); ++f) {
        for (int variant = 0; variant < 3; ++variant) {
            char diag[MT_DIAG_LEN] = "", name[160];
            int ok = 1, size, *world_of;
            MPI_Comm comm;

            MPI_Comm child = MPI_COMM_NULL;

            snprintf(name, sizeof(name), "%s on %s, even ranks %s, odd ranks %s",
                     firsts[f].name,
                     0 == variant   ? "a dup of world"
                     : 1 == variant ? "a reversed split"
                                    : "a dup of world dup'ed before its first call",
                     mt_kind_names[kinds[0]], mt_kind_names[kinds[1]]);
            mt_set_case(name);
            if (1 == variant) {
                MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &comm);
            } else {
                MPI_Comm_dup(MPI_COMM_WORLD, &comm);
            }
            if (2 == variant) {
                /* making a communicator runs Open MPI's own allreduce on the parent (host
                 * memory): it must not count as the parent's first call */
                MPI_Comm_dup(comm, &child);
            }
            MPI_Comm_size(comm, &size);
            world_of = malloc((size_t) size * sizeof(int));
            MPI_Allgather(&mt_rank, 1, MPI_INT, world_of, 1, MPI_INT, comm);
            /* the communicator's first allreduce or bcast: the named one (the allgather above
             * runs on host memory and takes no part in the agreement) */
            ok &= one_call(comm, world_of, firsts[f].c, firsts[f].root_last ? size - 1 : 0, 1000,
                           in, want, got, diag);
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
                ok &= one_call(comm, world_of, C_ALLREDUCE, 0, sizes[s], in, want, got, diag);
                ok &= one_call(comm, world_of, C_ALLREDUCE_INPLACE, 0, sizes[s], in, want, got,
                               diag);
                for (int root = 0; root < size; ++root) {
                    ok &= one_call(comm, world_of, C_BCAST, root, sizes[s], in, want, got, diag);
                }
                ok &= one_call(comm, world_of, C_IALLREDUCE, 0, sizes[s], in, want, got, diag);
                ok &= one_call(comm, world_of, C_IBCAST, size - 1, sizes[s], in, want, got,
                               diag);
            }
            free(world_of);
            if (MPI_COMM_NULL != child) {
                MPI_Comm_free(&child);
            }
            MPI_Comm_free(&comm);
            mt_check(ok, diag, "%s: every call right, none hung", name);
        }
    }
    free(in);
    free(want);
    free(got);
    return mt_finish();
}
