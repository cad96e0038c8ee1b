/*
 * coll_gpu_stage.c - host staging: the path that is always right.
 *
 * A device buffer is copied into pinned host memory, the saved host collective runs on the
 * copy, and the result is copied back.  The copy covers the whole byte range the datatype
 * layout touches (true lower bound to the end of the last element), gaps included, so any
 * derived datatype works: the host collective sees the same layout at the same offsets, and the
 * gap bytes it never writes go back unchanged.
 *
 *   user (device)  [ lo .............. lo+len )
 *                        | dev_memcpy in (when the call reads it, or the layout has gaps)
 *   bounce (host)  [ lo .............. lo+len )   host_base + lo == bounce start
 *                        | saved collective (tuned, basic, ...)
 *                        | dev_memcpy out (when the call writes it)
 *   user (device)  [ lo .............. lo+len )
 *
 * Each communicator's module keeps two pinned bounce buffers (send and receive roles) up to
 * coll_gpu_stage_cache_bytes; larger calls take theirs from the process's pinned pool
 * (coll_gpu_pinned_pool.c), and so does every nonblocking and persistent collective (slot -1:
 * its bounce memory lives until its request completes, or is freed).  When
 * no pinned memory can be had, plain host memory serves (slower copies, same result); when
 * not even that can be had, the rank takes part with scratch and fails the call (below).
 * Serves every collective of coll/gpu that the GPU path does not take.
 *
 * A failed copy does not let a rank leave the collective: its peers are already inside it and
 * would wait forever.  The rank takes part with the bounce memory as scratch (the right size,
 * contents not its own), copies nothing back, and returns the error afterwards (the
 * coll_gpu_staged_t's fail).  What peers receive from it is then undefined, and the failing
 * rank's error handler fires (MPI_ERRORS_ARE_FATAL, the default, ends the job).
 *
 * Test only: COLL_GPU_TEST_FAIL_STAGE=<rank in MPI_COMM_WORLD> makes every staging copy of
 * that process fail (tests/mpi/stage_failure.sh); unset in production.
 */
#include "ompi_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "opal/util/show_help.h"

#include "coll_gpu.h"

void mca_coll_gpu_report_failure(const char *what, struct ompi_communicator_t *comm,
                                 const char *fmt, ...)
{
    char detail[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    opal_show_help("help-coll-gpu.txt", "device-failure", true, what, ompi_comm_rank(comm),
                   coll_gpu_comm_cid(comm), detail);
}

void mca_coll_gpu_span(ompi_datatype_t *dtype, size_t count, ptrdiff_t *lo, size_t *len)
{
    ptrdiff_t lb, extent, true_lb, true_extent;

    *lo = 0;
    *len = 0;
    if (0 == count) {
        return;
    }
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    /* elements start at i*extent; element i touches [i*extent + true_lb, +true_extent) */
    if (0 <= extent) {
        *lo = true_lb;
        *len = (size_t) ((ptrdiff_t) (count - 1) * extent + true_extent);
    } else {
        *lo = (ptrdiff_t) (count - 1) * extent + true_lb;
        *len = (size_t) (true_extent - (ptrdiff_t) (count - 1) * extent);
    }
}

void mca_coll_gpu_span_v(ompi_datatype_t *dtype, int n, const int *counts, const int *displs,
                         ptrdiff_t *lo, size_t *len)
{
    ptrdiff_t lb, extent, lo_all = 0, hi_all = 0;
    bool any = false;

    ompi_datatype_get_extent(dtype, &lb, &extent);
    for (int i = 0; i < n; ++i) {
        ptrdiff_t blo, bhi;
        size_t blen;
        if (0 >= counts[i]) {
            continue;
        }
        mca_coll_gpu_span(dtype, (size_t) counts[i], &blo, &blen);
        blo += (ptrdiff_t) displs[i] * extent;
        bhi = blo + (ptrdiff_t) blen;
        if (!any || blo < lo_all) {
            lo_all = blo;
        }
        if (!any || bhi > hi_all) {
            hi_all = bhi;
        }
        any = true;
    }
    *lo = any ? lo_all : 0;
    *len = any ? (size_t) (hi_all - lo_all) : 0;
}

/* The byte range of blocks counts[i] of types[i] at byte displacements given as ints
 * (idispls) or as MPI_Aint (adispls; MPI_Neighbor_alltoallw), whichever is not NULL. */
static void span_blocks(int n, const int *counts, const int *idispls, const MPI_Aint *adispls,
                        struct ompi_datatype_t *const *types, ptrdiff_t *lo, size_t *len)
{
    ptrdiff_t lo_all = 0, hi_all = 0;
    bool any = false;

    for (int i = 0; i < n; ++i) {
        ptrdiff_t blo;
        size_t blen;
        if (0 >= counts[i]) {
            continue;
        }
        mca_coll_gpu_span(types[i], (size_t) counts[i], &blo, &blen);
        blo += (NULL != idispls) ? (ptrdiff_t) idispls[i] : (ptrdiff_t) adispls[i];
        if (!any || blo < lo_all) {
            lo_all = blo;
        }
        if (!any || blo + (ptrdiff_t) blen > hi_all) {
            hi_all = blo + (ptrdiff_t) blen;
        }
        any = true;
    }
    *lo = any ? lo_all : 0;
    *len = any ? (size_t) (hi_all - lo_all) : 0;
}

void mca_coll_gpu_span_w(int n, const int *counts, const int *displs,
                         struct ompi_datatype_t *const *types, ptrdiff_t *lo, size_t *len)
{
    span_blocks(n, counts, displs, NULL, types, lo, len);
}

void mca_coll_gpu_span_w_aint(int n, const int *counts, const MPI_Aint *displs,
                              struct ompi_datatype_t *const *types, ptrdiff_t *lo, size_t *len)
{
    span_blocks(n, counts, NULL, displs, types, lo, len);
}

/* Pinned memory of at least len bytes: a cached slot when it fits, else memory of this call's
 * own from the process's pinned pool (given back by stage_release).  Slot -1 always takes its
 * own: nonblocking collectives keep their bounce memory until the request completes, when
 * another call may already be using the cached slots. */
static int bounce_get(mca_coll_gpu_module_t *module, int slot, size_t len, void **ptr,
                      void **owned)
{
    coll_gpu_bounce_t *b;
    size_t want;
    int rc;

    *owned = NULL;
    if (0 > slot) {
        rc = mca_coll_gpu_pinned_get(len, owned);
        *ptr = *owned;
        return rc;
    }
    b = &module->bounce[slot];
    if (len <= b->size) {
        *ptr = b->ptr;
        return DEV_OK;
    }
    if (len > mca_coll_gpu_component.stage_cache_bytes) {
        rc = mca_coll_gpu_pinned_get(len, owned);
        *ptr = *owned;
        return rc;
    }
    /* grow the cached slot geometrically, within the cache limit */
    want = (0 == b->size) ? 64 * 1024 : b->size;
    while (want < len) {
        want *= 2;
    }
    if (want > mca_coll_gpu_component.stage_cache_bytes) {
        want = mca_coll_gpu_component.stage_cache_bytes;
    }
    if (NULL != b->ptr) {
        (void) dev_host_free(b->ptr);
        b->ptr = NULL;
        b->size = 0;
    }
    rc = dev_host_alloc(&b->ptr, want);
    if (DEV_OK != rc) {
        b->ptr = NULL;
        return rc;
    }
    b->size = want;
    *ptr = b->ptr;
    return DEV_OK;
}

void mca_coll_gpu_bounce_release(mca_coll_gpu_module_t *module)
{
    for (int i = 0; i < 2; ++i) {
        if (NULL != module->bounce[i].ptr) {
            (void) dev_host_free(module->bounce[i].ptr);
        }
        module->bounce[i].ptr = NULL;
        module->bounce[i].size = 0;
    }
}

/* Does the test-only fault injection (COLL_GPU_TEST_FAIL_STAGE) name this process?  The
 * variable is read once. */
static bool stage_fail_injected(void)
{
    static int target = -2; /* -2: not read yet; -1: no injection */

    if (-2 == target) {
        const char *env = getenv("COLL_GPU_TEST_FAIL_STAGE");
        target = (NULL != env && '\0' != env[0]) ? atoi(env) : -1;
    }
    return 0 <= target && ompi_comm_rank(&ompi_mpi_comm_world.comm) == target;
}

int mca_coll_gpu_stage_in(mca_coll_gpu_module_t *module, int slot, const void *user,
                          dev_mem_kind_t kind, ptrdiff_t lo, size_t len, bool copy_in,
                          struct ompi_communicator_t *comm, const char *what,
                          coll_gpu_staged_t *out)
{
    void *bounce = NULL;
    bool inject;
    int rc;

    out->user = (void *) user;
    out->lo = lo;
    out->len = len;
    out->owned = NULL;
    out->owned_malloc = false;
    out->owned_map = 0;
    out->slot = slot;
    out->fail = OMPI_SUCCESS;
    out->staged = !mca_coll_gpu_is_host(kind) && 0 < len;
    out->host_base = (char *) user;
    if (!out->staged) {
        return OMPI_SUCCESS;
    }
    /* testing only: no pinned and no plain memory (coll_gpu_test_fail_alloc_site stage) */
    inject = mca_coll_gpu_test_fail_alloc("stage");
    rc = inject ? DEV_ERR_NOMEM : bounce_get(module, slot, len, &bounce, &out->owned);
    if (DEV_OK != rc) {
        /* pageable memory does the same job, more slowly */
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR,
                         "coll:gpu:%s (cid %d): no pinned host memory for %zu B (%s): staging "
                         "through pageable memory", what, coll_gpu_comm_cid(comm), len,
                         dev_error_string());
        out->owned = inject ? NULL : malloc(len);
        if (NULL == out->owned) {
            /* Its peers are in the collective already: the rank takes part with scratch
             * address space whose pages the kernel gives only when touched (the receives
             * write them; what it sends is zeros), and fails the call.  Only when even that
             * cannot be had does it leave the collective (its peers may then wait forever). */
            void *map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (MAP_FAILED == map) {
                mca_coll_gpu_report_failure(what, comm, "cannot allocate %zu B of host memory "
                                            "for staging, nor map scratch for it", len);
                out->staged = false;
                out->host_base = NULL;
                return OMPI_ERR_OUT_OF_RESOURCE;
            }
            mca_coll_gpu_report_failure(what, comm, "cannot allocate %zu B of host memory for "
                                        "staging%s; taking part with scratch", len,
                                        inject ? " (coll_gpu_test_fail_alloc, test only)" : "");
            out->owned_map = len;
            out->fail = OMPI_ERR_OUT_OF_RESOURCE;
            bounce = map;
        } else {
            out->owned_malloc = true;
            bounce = out->owned;
        }
    }
    out->host_base = (char *) bounce - lo;
    if (0 != out->owned_map) {
        /* scratch: nothing of the user's goes in (and nothing comes back: fail is set) */
        out->owned = bounce;
    } else if (stage_fail_injected()) {
        mca_coll_gpu_report_failure(what, comm, "staging of %zu B failed: injected by "
                                    "COLL_GPU_TEST_FAIL_STAGE (test only); taking part with "
                                    "scratch", len);
        out->fail = OMPI_ERROR;
    } else if (copy_in) {
        rc = dev_memcpy(bounce, (const char *) user + lo, len);
        if (DEV_OK != rc) {
            mca_coll_gpu_report_failure(what, comm, "copy of %zu B from the device failed: %s; "
                                        "taking part with scratch", len, dev_error_string());
            out->fail = OMPI_ERROR;
        }
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpu_stage_out(mca_coll_gpu_module_t *module, coll_gpu_staged_t *staged,
                           bool copy_out, struct ompi_communicator_t *comm, const char *what)
{
    int ret = OMPI_SUCCESS;

    (void) module;
    if (!staged->staged) {
        return OMPI_SUCCESS;
    }
    if (copy_out && OMPI_SUCCESS == staged->fail) {
        int rc = dev_memcpy((char *) staged->user + staged->lo, staged->host_base + staged->lo,
                            staged->len);
        if (DEV_OK != rc) {
            mca_coll_gpu_report_failure(what, comm, "copy of %zu B to the device failed: %s",
                                        staged->len, dev_error_string());
            ret = OMPI_ERROR;
        }
    }
    mca_coll_gpu_stage_release(staged);
    return ret;
}

void mca_coll_gpu_stage_release(coll_gpu_staged_t *staged)
{
    if (NULL != staged->owned) {
        if (0 != staged->owned_map) {
            (void) munmap(staged->owned, staged->owned_map);
            staged->owned_map = 0;
        } else if (staged->owned_malloc) {
            free(staged->owned);
        } else {
            /* pinned memory of the call's own: bounce_get took it from the pool (len is what
             * it asked for) */
            mca_coll_gpu_pinned_put(staged->owned, staged->len);
        }
        staged->owned = NULL;
    }
    staged->staged = false;
}

int mca_coll_gpu_stage_buf(mca_coll_gpu_module_t *module, int slot, const void *buf,
                           dev_mem_kind_t kind, coll_gpu_layout_t layout, coll_gpu_dir_t dir,
                           struct ompi_communicator_t *comm, const char *what,
                           coll_gpu_staged_t *out)
{
    ptrdiff_t lo;
    size_t len;
    bool copy_in = (0 != (dir & COLL_GPU_READ));

    if (0 < layout.n) {
        mca_coll_gpu_span_v(layout.dtype, layout.n, layout.counts, layout.displs, &lo, &len);
        copy_in = true; /* the blocks leave holes */
    } else {
        mca_coll_gpu_span(layout.dtype, layout.count, &lo, &len);
        if (!copy_in && 0 < layout.count
            && !ompi_datatype_is_contiguous_memory_layout(layout.dtype,
                                                          (int32_t) layout.count)) {
            copy_in = true;
        }
    }
    return mca_coll_gpu_stage_in(module, slot, buf, kind, lo, len, copy_in, comm, what, out);
}

/* Leave a buffer as it is (host memory, MPI_IN_PLACE, or not significant here). */
static void stage_none(const void *buf, coll_gpu_staged_t *out)
{
    memset(out, 0, sizeof(*out));
    out->user = (void *) buf;
    out->host_base = (char *) buf;
}

/* The kind of the memory a layout at buf occupies: of its first byte, not of buf, which may
 * lie outside the allocation (a type with a positive lower bound, MPI_BOTTOM). */
static dev_mem_kind_t layout_kind(const void *buf, coll_gpu_layout_t layout)
{
    ptrdiff_t lo = 0;
    size_t len = 0;

    if (MPI_IN_PLACE == buf) {
        return DEV_MEM_HOST;
    }
    if (0 < layout.n) {
        mca_coll_gpu_span_v(layout.dtype, layout.n, layout.counts, layout.displs, &lo, &len);
    } else if (NULL != layout.dtype) {
        mca_coll_gpu_span(layout.dtype, layout.count, &lo, &len);
    }
    return mca_coll_gpu_classify(0 < len ? (const char *) buf + lo : buf);
}

/* stage_pair with the bounce slots of the send and receive buffer given (-1: per call). */
static int stage_pair_slots(mca_coll_gpu_module_t *module, struct ompi_communicator_t *comm,
                            const char *what, int sslot, const void *sbuf,
                            coll_gpu_layout_t slayout, coll_gpu_dir_t sdir, int rslot, void *rbuf,
                            coll_gpu_layout_t rlayout, coll_gpu_dir_t rdir, coll_gpu_staged_t *s,
                            coll_gpu_staged_t *r)
{
    /* a buffer insignificant on this rank may come with a type that is not one: not read */
    dev_mem_kind_t skind = (0 != sdir) ? layout_kind(sbuf, slayout) : DEV_MEM_HOST;
    dev_mem_kind_t rkind = (0 != rdir) ? layout_kind(rbuf, rlayout) : DEV_MEM_HOST;
    int rc;

    stage_none(sbuf, s);
    stage_none(rbuf, r);
    if (0 != sdir && MPI_IN_PLACE != sbuf && !mca_coll_gpu_is_host(skind)) {
        rc = mca_coll_gpu_stage_buf(module, sslot, sbuf, skind, slayout, sdir, comm, what, s);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
    }
    if (0 != rdir && MPI_IN_PLACE != rbuf && !mca_coll_gpu_is_host(rkind)) {
        rc = mca_coll_gpu_stage_buf(module, rslot, rbuf, rkind, rlayout, rdir, comm, what, r);
        if (OMPI_SUCCESS != rc) {
            (void) mca_coll_gpu_stage_out(module, s, false, comm, what);
            return rc;
        }
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpu_stage_pair(mca_coll_gpu_module_t *module, struct ompi_communicator_t *comm,
                            const char *what, const void *sbuf, coll_gpu_layout_t slayout,
                            coll_gpu_dir_t sdir, void *rbuf, coll_gpu_layout_t rlayout,
                            coll_gpu_dir_t rdir, coll_gpu_staged_t *s, coll_gpu_staged_t *r)
{
    return stage_pair_slots(module, comm, what, 0, sbuf, slayout, sdir, 1, rbuf, rlayout, rdir, s,
                            r);
}

int mca_coll_gpu_stage_pair_owned(mca_coll_gpu_module_t *module,
                                  struct ompi_communicator_t *comm, const char *what,
                                  const void *sbuf, coll_gpu_layout_t slayout,
                                  coll_gpu_dir_t sdir, void *rbuf, coll_gpu_layout_t rlayout,
                                  coll_gpu_dir_t rdir, coll_gpu_staged_t *s, coll_gpu_staged_t *r)
{
    return stage_pair_slots(module, comm, what, -1, sbuf, slayout, sdir, -1, rbuf, rlayout, rdir,
                            s, r);
}

int mca_coll_gpu_unstage_pair(mca_coll_gpu_module_t *module, struct ompi_communicator_t *comm,
                              const char *what, int rc, coll_gpu_staged_t *s, coll_gpu_dir_t sdir,
                              coll_gpu_staged_t *r, coll_gpu_dir_t rdir)
{
    /* a result computed from scratch goes nowhere */
    rc = mca_coll_gpu_first_error(mca_coll_gpu_first_error(s->fail, r->fail), rc);
    rc = mca_coll_gpu_unstage(module, r, rc, rdir, comm, what);
    return mca_coll_gpu_unstage(module, s, rc, sdir, comm, what);
}

int mca_coll_gpu_unstage(mca_coll_gpu_module_t *module, coll_gpu_staged_t *staged, int rc,
                         coll_gpu_dir_t dir, struct ompi_communicator_t *comm, const char *what)
{
    int first = mca_coll_gpu_first_error(staged->fail, rc);
    bool copy_out = (OMPI_SUCCESS == first) && (0 != (dir & COLL_GPU_WRITE));
    int out_rc = mca_coll_gpu_stage_out(module, staged, copy_out, comm, what);
    return mca_coll_gpu_first_error(first, out_rc);
}

void mca_coll_gpu_log_call(const char *what, struct ompi_communicator_t *comm, size_t bytes,
                           ompi_datatype_t *dtype, struct ompi_op_t *op, const char *path)
{
    if (opal_output_get_verbosity(mca_coll_gpu_component.output) < COLL_GPU_LOG_CALL) {
        return;
    }
    opal_output(mca_coll_gpu_component.output,
                "coll:gpu:%s (cid %d): rank %d: %zu B %s%s%s, %d ranks -> %s", what,
                coll_gpu_comm_cid(comm), ompi_comm_rank(comm), bytes,
                (NULL != dtype) ? dtype->name : "", (NULL != op) ? " " : "",
                (NULL != op) ? op->o_name : "", ompi_comm_size(comm), path);
}

void mca_coll_gpu_log_plan(const char *what, struct ompi_communicator_t *comm, size_t bytes,
                           ompi_datatype_t *dtype, struct ompi_op_t *op, topo_coll_t coll,
                           const coll_gpu_team_t *team, const topo_plan_t *plan)
{
    char path[TOPO_TEXT_LEN + 128];

    if (opal_output_get_verbosity(mca_coll_gpu_component.output) < COLL_GPU_LOG_CALL) {
        return;
    }
    if (NULL == team) {
        snprintf(path, sizeof(path), "staged (%s)", plan->reason);
    } else {
        snprintf(path, sizeof(path), "%s via %s, %d GPU(s), %d blocks x %d threads (%s%s)",
                 topo_alg_name(coll, plan->alg), (1 < team->ngpus) ? "NVL/P2P" : "IPC",
                 team->ngpus, plan->nblocks, plan->nthreads, plan->forced ? "forced; " : "",
                 plan->reason);
    }
    mca_coll_gpu_log_call(what, comm, bytes, dtype, op, path);
}
