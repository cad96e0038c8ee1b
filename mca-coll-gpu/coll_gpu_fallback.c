/*
 * coll_gpu_fallback.c - the host path of nonblocking allreduce and bcast calls queued on a node
 * team whose setup a nonblocking call began (coll_gpu_team.c) and that cannot run on the team
 * (the setup failed, or the team's plan is staged).
 *
 * Not libnbc, as the other staged calls: such a call leaves the queue when the setup's outcome
 * is known, at different moments on different ranks, and libnbc matches its calls by their
 * order on the communicator.  These use point-to-point messages of a tag of coll/gpu's own
 * (COLL_GPU_TAG_FALLBACK); one call at a time leaves the queue, in issue order on every rank,
 * and messages of one tag between two ranks arrive in order, so the calls never mix.  Both
 * buffers are staged (coll_gpu_stage.c: any kind, any layout, scratch when a copy fails), then:
 *
 *   allreduce   rank 0 receives every other rank's input, reduces them into its own in rank
 *               order, and sends the result to every other rank (every rank ends with rank 0's
 *               bits); without memory for the inputs it still receives them, into empty
 *               receives, and its empty result fails the call on every rank
 *   bcast       the root sends to every other rank
 *
 * Linear: it serves only the calls queued on the rare teams that fail or have no peer access,
 * until a blocking call settles the team (coll_gpu_engine.c, select_nb).
 */
#include "ompi_config.h"

#include <stdlib.h>

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
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm), rc;
    bool in_place = !bcast && MPI_IN_PLACE == sbuf;
    void *r;

    *f = (coll_gpu_fallback_t){.m = m, .comm = comm, .what = what, .bcast = bcast,
                               .root = bcast ? root : 0, .count = count, .dtype = dtype,
                               .op = op, .rc = OMPI_SUCCESS};
    f->sdir = (bcast || in_place) ? COLL_GPU_NONE : COLL_GPU_READ;
    f->rdir = bcast      ? ((rank == root) ? COLL_GPU_READ : COLL_GPU_WRITE)
              : in_place ? COLL_GPU_READWRITE
                         : COLL_GPU_WRITE;
    f->reqs = calloc((size_t) (2 * size), sizeof(ompi_request_t *));
    if (NULL == f->reqs) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    rc = mca_coll_gpu_stage_sides(
        m, true,
        &(coll_gpu_side_t){.buf = sbuf, .dir = f->sdir, .layout = COLL_GPU_LAYOUT(dtype, count)},
        &(coll_gpu_side_t){.buf = rbuf, .dir = f->rdir, .layout = COLL_GPU_LAYOUT(dtype, count)},
        comm, what, &f->s, &f->r);
    if (OMPI_SUCCESS != rc) {
        free(f->reqs);
        f->reqs = NULL;
        return rc;
    }
    f->started = true;
    f->phase = FB_SPREAD;
    r = mca_coll_gpu_view(&f->r);
    if (bcast || 0 != rank) {
        /* the root's data, or an input to rank 0, goes out; the result comes back into r */
        for (int p = 0; p < size; ++p) {
            if (bcast ? (rank == root && p != root) : 0 == p) {
                fb_post(f, true, (bcast || in_place) ? r : mca_coll_gpu_view(&f->s), p, count);
            }
        }
        if (!bcast || rank != root) {
            fb_post(f, false, r, f->root, count);
        }
        return OMPI_SUCCESS;
    }
    /* rank 0: its own input is where the result builds up */
    if (!in_place) {
        rc = ompi_datatype_copy_content_same_ddt(dtype, count, r, mca_coll_gpu_view(&f->s));
        f->rc = (OMPI_SUCCESS == rc) ? f->rc : rc;
    }
    mca_coll_gpu_span(dtype, (size_t) count, &f->lo, &f->span);
    f->gather = (1 == size || mca_coll_gpu_test_fail_alloc("fallback"))
                    ? NULL /* testing only: as if out of host memory */
                    : malloc((size_t) (size - 1) * (0 < f->span ? f->span : 1));
    if (1 < size && NULL == f->gather) {
        /* the others' inputs are on their way and the others wait for a result: each input
         * goes into an empty receive (which fails as truncated, consuming it), and the empty
         * result tells the others the call failed (fb_done) */
        mca_coll_gpu_report_failure(what, comm, "out of host memory for the other ranks' "
                                    "inputs; the call fails on every rank");
        f->rc = OMPI_ERR_OUT_OF_RESOURCE;
    }
    for (int p = 1; p < size; ++p) {
        fb_post(f, false, (NULL != f->gather) ? f->gather + (size_t) (p - 1) * f->span - f->lo : r,
                p, (NULL != f->gather) ? count : 0);
    }
    f->phase = FB_GATHER;
    return OMPI_SUCCESS;
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
