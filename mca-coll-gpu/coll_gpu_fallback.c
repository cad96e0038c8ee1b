/*
 * coll_gpu_fallback.c - the host path of nonblocking allreduce and bcast calls queued on a node
 * team whose setup a nonblocking call began (coll_gpu_team.c) and that cannot run on the team:
 * the setup failed, or the team's plan is staged (no peer access).
 *
 * Why not Open MPI's own nonblocking collectives (libnbc), as the other staged calls do: such a
 * call was queued while the setup was in flight on some rank, and leaves the queue when the
 * setup's outcome is known there, which happens at different moments on different ranks.
 * Started then, a libnbc call would take its place among the communicator's other libnbc calls
 * in a different order on different ranks, and libnbc matches its calls by that order.  These
 * calls use point-to-point messages of a tag of coll/gpu's own (COLL_GPU_TAG_FALLBACK), which
 * nothing else uses on the communicator; one call at a time leaves the team's queue, in issue
 * order on every rank, and messages between two ranks with one tag arrive in order, so the
 * calls never mix.
 *
 * Both buffers are staged through host memory of the call's own (any kind, any layout), then:
 *
 *   allreduce   rank 0 receives every other rank's input, reduces them into its own in rank
 *               order (ompi_op_reduce: the rank's data op what rank 0 holds so far), and sends
 *               the result to every other rank: every rank ends with rank 0's bits
 *   bcast       the root sends to every other rank
 *
 * Linear, so slower than libnbc's algorithms from a few ranks on; it serves the rare teams that
 * fail or have no peer access, and only the calls queued on them.  A rank whose staging copy
 * fails still takes part with scratch, and its call returns the error (coll_gpu_stage.c); when
 * rank 0 has no memory for the others' inputs of an allreduce it still receives them, and its
 * empty result fails the call on every rank.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/mca/pml/pml.h"
#include "ompi/op/op.h"
#include "ompi/request/request.h"

#include "coll_gpu.h"

#define FB_GATHER 1 /* allreduce, rank 0: receiving the others' inputs */
#define FB_SPREAD 2 /* sending (or, not rank 0 / not the root, receiving) the result */

/* Post a message of count elements (f->count, or 0 for rank 0's failed gather: see
 * mca_coll_gpu_fallback_start). */
static void fb_post(coll_gpu_fallback_t *f, bool send, void *buf, int peer, int count)
{
    ompi_request_t **req = &f->reqs[f->nreqs];
    int rc = send ? MCA_PML_CALL(isend(buf, (size_t) count, f->dtype, peer,
                                       COLL_GPU_TAG_FALLBACK, MCA_PML_BASE_SEND_STANDARD,
                                       f->comm, req))
                  : MCA_PML_CALL(irecv(buf, (size_t) count, f->dtype, peer,
                                       COLL_GPU_TAG_FALLBACK, f->comm, req));
    if (OMPI_SUCCESS == rc) {
        ++f->nreqs;
    } else if (OMPI_SUCCESS == f->rc) {
        f->rc = rc;
    }
}

int mca_coll_gpu_fallback_start(coll_gpu_fallback_t *f, mca_coll_gpu_module_t *m,
                                struct ompi_communicator_t *comm, const char *what, bool bcast,
                                const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root)
{
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    bool in_place = !bcast && MPI_IN_PLACE == sbuf;
    coll_gpu_dir_t sdir, rdir;
    int rc;

    memset(f, 0, sizeof(*f));
    f->comm = comm;
    f->what = what;
    f->bcast = bcast;
    f->count = count;
    f->dtype = dtype;
    f->op = op;
    f->root = bcast ? root : 0;
    f->rc = OMPI_SUCCESS;
    f->reqs = calloc((size_t) (2 * size), sizeof(ompi_request_t *));
    if (NULL == f->reqs) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (bcast) {
        sdir = COLL_GPU_NONE;
        rdir = (rank == root) ? COLL_GPU_READ : COLL_GPU_WRITE;
    } else {
        sdir = in_place ? COLL_GPU_NONE : COLL_GPU_READ;
        rdir = in_place ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    }
    f->sdir = sdir;
    f->rdir = rdir;
    rc = mca_coll_gpu_stage_sides(
        m, true,
        &(coll_gpu_side_t){.buf = sbuf, .dir = sdir, .layout = COLL_GPU_LAYOUT(dtype, count)},
        &(coll_gpu_side_t){.buf = rbuf, .dir = rdir, .layout = COLL_GPU_LAYOUT(dtype, count)}, comm,
        what, &f->s, &f->r);
    if (OMPI_SUCCESS != rc) {
        free(f->reqs);
        f->reqs = NULL;
        return rc;
    }
    f->m = m;
    f->started = true;
    if (bcast) {
        for (int p = 0; rank == root && p < size; ++p) {
            if (p != root) {
                fb_post(f, true, mca_coll_gpu_view(&f->r), p, f->count);
            }
        }
        if (rank != root) {
            fb_post(f, false, mca_coll_gpu_view(&f->r), root, f->count);
        }
        f->phase = FB_SPREAD;
        return OMPI_SUCCESS;
    }
    if (0 != rank) {
        /* the input goes to rank 0, the result comes back into the receive buffer */
        fb_post(f, true, in_place ? mca_coll_gpu_view(&f->r) : mca_coll_gpu_view(&f->s), 0,
                f->count);
        fb_post(f, false, mca_coll_gpu_view(&f->r), 0, f->count);
        f->phase = FB_SPREAD;
        return OMPI_SUCCESS;
    }
    /* rank 0: its own input is where the result builds up */
    if (!in_place) {
        rc = ompi_datatype_copy_content_same_ddt(dtype, count, mca_coll_gpu_view(&f->r),
                                                 mca_coll_gpu_view(&f->s));
        f->rc = (OMPI_SUCCESS == rc) ? f->rc : rc;
    }
    mca_coll_gpu_span(dtype, (size_t) count, &f->lo, &f->span);
    if (1 < size) {
        f->gather = mca_coll_gpu_test_fail_alloc("fallback")
                        ? NULL /* testing only: as if out of host memory */
                        : malloc((size_t) (size - 1) * (0 < f->span ? f->span : 1));
        if (NULL == f->gather) {
            /* No room for the others' inputs, but they are on their way and the others wait
             * for a result: rank 0 takes each input into an empty receive (which fails as
             * truncated, consuming it) and answers with an empty result, which the others
             * take for the call's failure (fb_done). */
            mca_coll_gpu_report_failure(what, comm, "out of host memory for the other ranks' "
                                        "inputs; the call fails on every rank");
            f->rc = OMPI_ERR_OUT_OF_RESOURCE;
            for (int p = 1; p < size; ++p) {
                fb_post(f, false, mca_coll_gpu_view(&f->r), p, 0);
            }
            f->phase = FB_GATHER;
            return OMPI_SUCCESS;
        }
    }
    for (int p = 1; p < size; ++p) {
        fb_post(f, false, f->gather + (size_t) (p - 1) * f->span - f->lo, p, f->count);
    }
    f->phase = FB_GATHER;
    return OMPI_SUCCESS;
}

bool mca_coll_gpu_requests_done(ompi_request_t **reqs, int *nreqs, int *first_error)
{
    int flag = 0, rc;

    if (0 == *nreqs) {
        return true;
    }
    rc = ompi_request_test_all((size_t) *nreqs, reqs, &flag, MPI_STATUSES_IGNORE);
    if (!flag && OMPI_SUCCESS == rc) {
        return false;
    }
    if (OMPI_SUCCESS != rc && OMPI_SUCCESS == *first_error) {
        *first_error = rc;
    }
    *nreqs = 0;
    return true;
}

/* Have the posted messages completed?  An allreduce's rank other than 0 also reads the size of
 * the result it received: empty (of a call that is not) means rank 0 failed the call. */
static bool fb_done(coll_gpu_fallback_t *f)
{
    bool result_in = !f->bcast && 0 != ompi_comm_rank(f->comm) && FB_SPREAD == f->phase
                     && 2 == f->nreqs && 0 < f->count;
    size_t got = 0;

    if (result_in) {
        if (!REQUEST_COMPLETE(f->reqs[0]) || !REQUEST_COMPLETE(f->reqs[1])) {
            return false; /* the caller's loop moves progress on */
        }
        got = f->reqs[1]->req_status._ucount; /* read before the request is freed */
    }
    if (!mca_coll_gpu_requests_done(f->reqs, &f->nreqs, &f->rc)) {
        return false;
    }
    if (result_in && 0 == got && OMPI_SUCCESS == f->rc) {
        f->rc = OMPI_ERR_OUT_OF_RESOURCE;
    }
    return true;
}

bool mca_coll_gpu_fallback_test(coll_gpu_fallback_t *f)
{
    int size = ompi_comm_size(f->comm);

    if (!f->started) {
        return true;
    }
    if (!fb_done(f)) {
        return false;
    }
    if (FB_GATHER == f->phase) {
        void *acc = mca_coll_gpu_view(&f->r);
        if (NULL != f->gather) {
            for (int p = 1; p < size; ++p) {
                ompi_op_reduce(f->op, f->gather + (size_t) (p - 1) * f->span - f->lo, acc,
                               (size_t) f->count, f->dtype);
            }
        }
        for (int p = 1; p < size; ++p) {
            /* no gather, no result: an empty one tells the others (fb_done) */
            fb_post(f, true, acc, p, (NULL != f->gather) ? f->count : 0);
        }
        f->phase = FB_SPREAD;
        if (!fb_done(f)) {
            return false;
        }
    }
    free(f->gather);
    f->gather = NULL;
    free(f->reqs);
    f->reqs = NULL;
    f->rc = mca_coll_gpu_unstage_pair(f->m, f->comm, f->what, f->rc, &f->s, f->sdir, &f->r,
                                      f->rdir);
    f->started = false;
    return true;
}
