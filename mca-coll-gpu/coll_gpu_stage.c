/*
 * coll_gpu_stage.c - host staging: the path that is always right.
 *
 * A device buffer is copied into pinned host memory, the saved host collective runs on the
 * copy, and the result is copied back.  The copy covers the whole byte range the layout touches
 * (true lower bound to the end of the last element), gaps included, so any derived datatype
 * works: the host collective sees the same layout at the same offsets, and the gap bytes it
 * never writes go back unchanged.
 *
 *   user (device)  [ lo .............. lo+len )
 *                        | copy in (when the call reads it, or the layout has gaps)
 *   bounce (host)  [ lo .............. lo+len )   host_base + lo == bounce start
 *                        | saved collective (tuned, basic, ...)
 *                        | copy out (when the call writes it)
 *   user (device)  [ lo .............. lo+len )
 *
 * A span need not be one piece of memory: a type of absolute addresses (MPI_BOTTOM) may have
 * its blocks in several allocations, some in host memory, with unmapped memory between them.
 * Such a span is copied in pieces (mca_coll_gpu_layout_pieces): one per device or managed
 * allocation (its blocks' span there, gaps included) and one per run of host blocks; where the
 * pieces fill little of the span, the bounce memory is an anonymous mapping whose pages come
 * only where they go.  A rank whose layout has any device block is a device rank, even where
 * its first byte is host memory (mca_coll_gpu_layout_kind).
 *
 * Bounce memory: the module's two cached slots (send and receive) up to
 * coll_gpu_stage_cache_bytes, else the process's pinned pool (coll_gpu_pinned_pool.c), which
 * also serves every nonblocking and persistent call (slot -1: the memory lives as long as its
 * request); without pinned memory plain host memory serves.  A rank whose copy or allocation
 * fails still takes part with scratch (its peers are in the collective already), copies nothing
 * back, and returns the error afterwards (coll_gpu_staged_t's fail).
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
#include <sys/uio.h>

#include "opal/datatype/opal_convertor.h"
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

void mca_coll_gpu_span_blocks(int n, const int *counts, ompi_datatype_t *dtype,
                              struct ompi_datatype_t *const *types, const int *idispls,
                              const MPI_Aint *adispls, ptrdiff_t *lo, size_t *len)
{
    ptrdiff_t lb, scale = 1, lo_all = PTRDIFF_MAX, hi_all = PTRDIFF_MIN;

    if (NULL == types) {
        ompi_datatype_get_extent(dtype, &lb, &scale); /* displacements in extents */
    }
    for (int i = 0; i < n; ++i) {
        ptrdiff_t blo;
        size_t blen;
        if (0 >= counts[i]) {
            continue;
        }
        mca_coll_gpu_span((NULL != types) ? types[i] : dtype, (size_t) counts[i], &blo, &blen);
        blo += (NULL != idispls) ? (ptrdiff_t) idispls[i] * scale : (ptrdiff_t) adispls[i];
        lo_all = (blo < lo_all) ? blo : lo_all;
        hi_all = (blo + (ptrdiff_t) blen > hi_all) ? blo + (ptrdiff_t) blen : hi_all;
    }
    *lo = (lo_all <= hi_all) ? lo_all : 0;
    *len = (lo_all <= hi_all) ? (size_t) (hi_all - lo_all) : 0;
}

/* ---- layouts that cross allocations and memory kinds ------------------------------------- */

/* The span of a layout (its v blocks' union, or count elements). */
static void layout_span(coll_gpu_layout_t layout, ptrdiff_t *lo, size_t *len)
{
    if (0 < layout.n) {
        mca_coll_gpu_span_blocks(layout.n, layout.counts, layout.dtype, NULL, layout.displs,
                                 NULL, lo, len);
    } else {
        mca_coll_gpu_span(layout.dtype, layout.count, lo, len);
    }
}

/* One range of bytes without gaps: its span is its memory, of one kind. */
static bool layout_dense(coll_gpu_layout_t layout)
{
    return 0 == layout.n
           && (0 == layout.count
               || ompi_datatype_is_contiguous_memory_layout(layout.dtype,
                                                            (int32_t) layout.count));
}

/* A memory kind holds for a whole page (CUDA and the emulated device map whole pages): the runs
 * of a layout that start on the page last classified take its answer. */
#define KIND_PAGE ((uintptr_t) 4096)

typedef struct {
    uintptr_t page; /* UINTPTR_MAX: none yet */
    dev_mem_kind_t kind;
} kind_memo_t;

static dev_mem_kind_t memo_classify(kind_memo_t *memo, const char *p)
{
    uintptr_t page = (uintptr_t) p / KIND_PAGE;

    if (page != memo->page) {
        memo->page = page;
        memo->kind = mca_coll_gpu_classify(p);
    }
    return memo->kind;
}

/* What layout_walk calls for each run [p, p + n): 0 to go on, anything else to stop with. */
typedef int (*walk_fn_t)(void *ctx, char *p, size_t n);

#define WALK_IOV 32   /* runs asked of the convertor at a time */
#define WALK_UNSURE (-1)

/* Call fn for every run of contiguous bytes that layout touches at buf, as Open MPI's convertor
 * lists them (raw mode: nothing is read or written).  Returns fn's first non-zero answer, 0
 * when every run was seen, or WALK_UNSURE when the convertor could not be set up or its runs do
 * not add up to the layout's bytes (the caller keeps to the first byte's kind, the whole span). */
static int layout_walk(const void *buf, coll_gpu_layout_t layout, walk_fn_t fn, void *ctx)
{
    int nblocks = (0 < layout.n) ? layout.n : 1, rc = 0;
    ptrdiff_t lb, extent;
    size_t dsize;

    ompi_datatype_get_extent(layout.dtype, &lb, &extent);
    ompi_datatype_type_size(layout.dtype, &dsize);
    for (int b = 0; b < nblocks && 0 == rc; ++b) {
        size_t count = layout.count, seen = 0;
        const char *base = (const char *) buf;
        opal_convertor_t conv;
        int32_t done = 0;

        if (0 < layout.n) {
            count = (0 < layout.counts[b]) ? (size_t) layout.counts[b] : 0;
            base += (ptrdiff_t) layout.displs[b] * extent;
        }
        if (0 == count || 0 == dsize) {
            continue;
        }
        OBJ_CONSTRUCT(&conv, opal_convertor_t);
        if (OPAL_SUCCESS
            != opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor,
                                                        &layout.dtype->super, count, base, 0,
                                                        &conv)) {
            rc = WALK_UNSURE;
        }
        while (0 == rc && 1 != done) {
            struct iovec iov[WALK_IOV];
            uint32_t niov = WALK_IOV;
            size_t bytes = 0;

            done = opal_convertor_raw(&conv, iov, &niov, &bytes);
            if (0 == niov && 1 != done) {
                rc = WALK_UNSURE; /* no progress: never seen, but a loop must not hang */
            }
            for (uint32_t i = 0; i < niov && 0 == rc; ++i) {
                if (0 < iov[i].iov_len) {
                    seen += iov[i].iov_len;
                    rc = fn(ctx, (char *) iov[i].iov_base, iov[i].iov_len);
                }
            }
        }
        OBJ_DESTRUCT(&conv);
        if (0 == rc && seen != count * dsize) {
            rc = WALK_UNSURE;
        }
    }
    return rc;
}

/* layout_walk's state: the kind of the first run that is not host memory (kind_only: that
 * ends the walk), or the pieces so far and the piece of the last host run. */
typedef struct {
    const char *user;
    kind_memo_t memo;
    bool kind_only;
    dev_mem_kind_t kind;
    coll_gpu_piece_t *pieces;
    int n, cap, last_host; /* last_host -1: none */
} walk_t;

#define PIECES_NOMEM 2

/* Extend piece to cover the run [off, off + n). */
static void piece_cover(coll_gpu_piece_t *piece, ptrdiff_t off, size_t n)
{
    ptrdiff_t end = piece->off + (ptrdiff_t) piece->len;

    end = (off + (ptrdiff_t) n > end) ? off + (ptrdiff_t) n : end;
    piece->off = (off < piece->off) ? off : piece->off;
    piece->len = (size_t) (end - piece->off);
}

static int walk_visit(void *ctx, char *p, size_t n)
{
    walk_t *w = (walk_t *) ctx;
    ptrdiff_t off = p - w->user;
    dev_mem_kind_t kind = memo_classify(&w->memo, p);
    bool host = mca_coll_gpu_is_host(kind);
    coll_gpu_piece_t *piece, *grown;
    void *base = p;
    size_t size = n;
    uint64_t id;

    if (w->kind_only) { /* a run lies in one allocation, or the program is erroneous */
        w->kind = kind;
        return host ? 0 : 1;
    }
    /* a host run that starts inside the last host piece, or right after it, extends it */
    piece = (host && 0 <= w->last_host) ? &w->pieces[w->last_host] : NULL;
    if (NULL != piece && off >= piece->off && off <= piece->off + (ptrdiff_t) piece->len) {
        piece_cover(piece, off, n);
        return 0;
    }
    /* a device run: the piece of its allocation grows to cover it */
    for (int a = w->n - 1; !host && a >= 0; --a) {
        piece = &w->pieces[a];
        if (!piece->host && p >= piece->base && p < piece->base + piece->size) {
            piece_cover(piece, off, n);
            return 0;
        }
    }
    if (!host && DEV_OK != dev_mem_range(p, &base, &size, &id)) {
        base = p; /* memory the device layer cannot place: this run alone */
        size = n;
    }
    if (w->n == w->cap) {
        w->cap = (0 == w->cap) ? 8 : 2 * w->cap;
        grown = realloc(w->pieces, (size_t) w->cap * sizeof(*grown));
        if (NULL == grown) {
            return PIECES_NOMEM;
        }
        w->pieces = grown;
    }
    w->pieces[w->n] = (coll_gpu_piece_t){off, n, host, (const char *) base, size};
    w->last_host = host ? w->n : w->last_host;
    ++w->n;
    return 0;
}

/* An upper bound of the runs a layout has: its basic elements. */
static size_t layout_runs_bound(coll_gpu_layout_t layout)
{
    size_t elems = 0;

    if (0 == layout.n) {
        return layout.count * layout.dtype->super.nbElems;
    }
    for (int b = 0; b < layout.n; ++b) {
        elems += (0 < layout.counts[b]) ? (size_t) layout.counts[b] : 0;
    }
    return elems * layout.dtype->super.nbElems;
}

dev_mem_kind_t mca_coll_gpu_layout_kind(const void *buf, coll_gpu_layout_t layout)
{
    const char *first;
    uintptr_t page, last;
    walk_t w = {.memo.page = UINTPTR_MAX, .kind_only = true};
    dev_mem_kind_t kind;
    ptrdiff_t lo = 0;
    size_t len = 0;

    if (MPI_IN_PLACE == buf) {
        return DEV_MEM_HOST;
    }
    if (NULL != layout.dtype) {
        layout_span(layout, &lo, &len);
    }
    first = (0 < len) ? (const char *) buf + lo : (const char *) buf;
    kind = mca_coll_gpu_classify(first);
    if (!mca_coll_gpu_is_host(kind) || 0 == len || !mca_coll_gpu_component.dev_opened
        || layout_dense(layout)) {
        return kind;
    }
    /* every page of the span, or every run of the layout, whichever are fewer: the pages of a
     * compact layout, the runs of one whose blocks lie far apart (MPI_BOTTOM) */
    page = (uintptr_t) first / KIND_PAGE;
    last = ((uintptr_t) first + len - 1) / KIND_PAGE;
    if (last - page <= layout_runs_bound(layout)) {
        while (page++ < last && mca_coll_gpu_is_host(kind)) {
            kind = mca_coll_gpu_classify((const void *) (page * KIND_PAGE));
        }
        return kind;
    }
    w.kind = kind;
    return (WALK_UNSURE == layout_walk(buf, layout, walk_visit, &w)) ? kind : w.kind;
}

/* Do the len bytes from first lie in the device (or managed) allocation of first? */
static bool in_one_allocation(const char *first, size_t len)
{
    void *base;
    size_t size;
    uint64_t id;

    return !mca_coll_gpu_is_host(mca_coll_gpu_classify(first))
           && DEV_OK == dev_mem_range(first, &base, &size, &id) && first >= (const char *) base
           && len <= size - (size_t) (first - (const char *) base);
}

int mca_coll_gpu_layout_pieces(const void *buf, coll_gpu_layout_t layout, ptrdiff_t lo,
                               size_t len, coll_gpu_piece_t **pieces, int *npieces)
{
    const char *first = (const char *) buf + lo;
    walk_t w = {.user = (const char *) buf, .memo.page = UINTPTR_MAX, .last_host = -1};
    int rc;

    *pieces = NULL;
    *npieces = 0;
    if (0 == len || !mca_coll_gpu_component.dev_opened || layout_dense(layout)) {
        return OMPI_SUCCESS;
    }
    /* the common case: the whole span in the first byte's allocation, one copy */
    if (in_one_allocation(first, len)) {
        return OMPI_SUCCESS;
    }
    rc = layout_walk(buf, layout, walk_visit, &w);
    if (0 != rc) {
        free(w.pieces);
        /* a walk that cannot be trusted leaves the whole span, as before the pieces existed */
        return (PIECES_NOMEM == rc) ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_SUCCESS;
    }
    *pieces = w.pieces;
    *npieces = w.n;
    return OMPI_SUCCESS;
}

/* The copies of mca_coll_gpu_pieces_copy; with a stream, device pieces are queued on it
 * (counted in *enqueued) instead of waited for. */
static int pieces_copy_on(void *user, char *image, ptrdiff_t lo, size_t len,
                          const coll_gpu_piece_t *pieces, int npieces, bool to_image,
                          dev_stream_t *stream, int *enqueued, size_t *failed_len)
{
    coll_gpu_piece_t whole = {lo, len, false, NULL, 0};

    if (NULL == pieces) {
        pieces = &whole;
        npieces = 1;
    }
    for (int i = 0; i < npieces; ++i) {
        char *u = (char *) user + pieces[i].off, *h = image + pieces[i].off;
        char *dst = to_image ? h : u, *src = to_image ? u : h;
        int rc = DEV_OK;

        if (pieces[i].host) {
            memcpy(dst, src, pieces[i].len);
        } else if (NULL != stream) {
            rc = dev_memcpy_async(dst, src, pieces[i].len, stream);
            *enqueued += (DEV_OK == rc);
        } else {
            rc = dev_memcpy(dst, src, pieces[i].len);
        }
        if (DEV_OK != rc) {
            *failed_len = pieces[i].len;
            return rc;
        }
    }
    return DEV_OK;
}

int mca_coll_gpu_pieces_copy(void *user, char *image, ptrdiff_t lo, size_t len,
                             const coll_gpu_piece_t *pieces, int npieces, bool to_image,
                             size_t *failed_len)
{
    return pieces_copy_on(user, image, lo, len, pieces, npieces, to_image, NULL, NULL,
                          failed_len);
}

int mca_coll_gpu_stage_copy(const coll_gpu_staged_t *staged, bool to_bounce, dev_stream_t *stream,
                            int *enqueued, size_t *failed_len)
{
    return pieces_copy_on(staged->user, staged->host_base, staged->lo, staged->len,
                          staged->pieces, staged->npieces, to_bounce, stream, enqueued, failed_len);
}

/* ---- bounce memory ------------------------------------------------------------------------- */

/* Pinned memory of at least len bytes: a cached slot when it fits (grown geometrically within
 * the cache limit), else memory of this call's own (*owned) from the pinned pool.  Slot -1
 * always takes its own: a nonblocking call keeps its memory until the request completes, when
 * another call may already be using the cached slots. */
static int bounce_get(mca_coll_gpu_module_t *module, int slot, size_t len, void **ptr,
                      void **owned)
{
    coll_gpu_bounce_t *b = (0 <= slot) ? &module->bounce[slot] : NULL;
    size_t want, cap = mca_coll_gpu_component.stage_cache_bytes;
    int rc;

    *owned = NULL;
    if (NULL != b && len <= b->size) {
        *ptr = b->ptr;
        return DEV_OK;
    }
    if (NULL == b || len > cap) {
        rc = mca_coll_gpu_pinned_get(len, owned);
        *ptr = *owned;
        return rc;
    }
    want = (0 == b->size) ? 64 * 1024 : b->size;
    while (want < len) {
        want *= 2;
    }
    if (NULL != b->ptr) {
        (void) dev_host_free(b->ptr);
    }
    b->size = 0;
    rc = dev_host_alloc(&b->ptr, (want < cap) ? want : cap);
    if (DEV_OK != rc) {
        b->ptr = NULL;
        return rc;
    }
    b->size = (want < cap) ? want : cap;
    *ptr = b->ptr;
    return DEV_OK;
}

void mca_coll_gpu_bounce_release(mca_coll_gpu_module_t *module)
{
    for (int i = 0; i < 2; ++i) {
        if (NULL != module->bounce[i].ptr) {
            (void) dev_host_free(module->bounce[i].ptr);
        }
        module->bounce[i] = (coll_gpu_bounce_t){NULL, 0};
    }
}

/* Anonymous memory of len bytes whose pages the kernel gives only when touched; NULL if none. */
static void *anon_map(size_t len)
{
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    return (MAP_FAILED == map) ? NULL : map;
}

/* Bounce memory for a span of len bytes, or scratch to take part with: see
 * mca_coll_gpu_stage_in.  pieces (NULL: one copy of the span) is the list the span is copied
 * in; out owns it from here on (mca_coll_gpu_stage_release frees it). */
static int stage_range(mca_coll_gpu_module_t *module, int slot, const void *user,
                       dev_mem_kind_t kind, ptrdiff_t lo, size_t len, coll_gpu_piece_t *pieces,
                       int npieces, bool copy_in, struct ompi_communicator_t *comm,
                       const char *what, coll_gpu_staged_t *out)
{
    static int fail_target = -2;
    void *bounce = NULL;
    size_t data = 0, failed_len = 0;
    bool inject = false;
    int rc = DEV_ERR_NOMEM;

    *out = (coll_gpu_staged_t){.user = (void *) user, .host_base = (char *) user, .lo = lo,
                               .len = len, .pieces = pieces, .npieces = npieces, .fill = copy_in,
                               .staged = !mca_coll_gpu_is_host(kind) && 0 < len};
    if (!out->staged) {
        mca_coll_gpu_stage_release(out);
        return OMPI_SUCCESS;
    }
    for (int i = 0; i < npieces; ++i) {
        data += pieces[i].len;
    }
    if (mca_coll_gpu_test_fail_alloc("stage")) {
        inject = true; /* testing only: no pinned and no plain memory */
    } else if (NULL != pieces && data <= len / 2
               && (0 > slot || len > mca_coll_gpu_component.stage_cache_bytes)) {
        /* pieces that fill little of their span (blocks megabytes apart) would pin the whole
         * span for this call alone: anonymous pages serve, given only where the pieces go */
        bounce = out->owned = anon_map(len);
        out->owned_how = COLL_GPU_OWNED_MAP;
        rc = (NULL != bounce) ? DEV_OK : DEV_ERR_NOMEM;
    } else {
        rc = bounce_get(module, slot, len, &bounce, &out->owned);
    }
    if (DEV_OK != rc) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR,
                         "coll:gpu:%s (cid %d): no pinned host memory for %zu B (%s): staging "
                         "through pageable memory", what, coll_gpu_comm_cid(comm), len,
                         dev_error_string());
        bounce = out->owned = inject ? NULL : malloc(len);
        out->owned_how = COLL_GPU_OWNED_MALLOC;
    }
    if (NULL == bounce) {
        /* the rank takes part with scratch (what it sends is zeros) and fails the call; only
         * when not even that can be had does it leave the collective */
        bounce = out->owned = anon_map(len);
        out->owned_how = COLL_GPU_OWNED_MAP;
        if (NULL == bounce) {
            mca_coll_gpu_report_failure(what, comm, "cannot allocate %zu B of host memory for "
                                        "staging, nor map scratch for it", len);
            mca_coll_gpu_stage_release(out);
            out->host_base = NULL;
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        mca_coll_gpu_report_failure(what, comm, "cannot allocate %zu B of host memory for "
                                    "staging%s; taking part with scratch", len,
                                    inject ? " (coll_gpu_test_fail_alloc, test only)" : "");
        out->fail = OMPI_ERR_OUT_OF_RESOURCE;
    }
    out->host_base = (char *) bounce - lo;
    if (OMPI_SUCCESS != out->fail) {
        /* scratch: nothing of the user's goes in (and nothing comes back) */
    } else if (mca_coll_gpu_test_env_names_me("COLL_GPU_TEST_FAIL_STAGE", &fail_target)) {
        mca_coll_gpu_report_failure(what, comm, "staging of %zu B failed: injected by "
                                    "COLL_GPU_TEST_FAIL_STAGE (test only); taking part with "
                                    "scratch", len);
        out->fail = OMPI_ERROR;
    } else if (copy_in && DEV_OK != mca_coll_gpu_stage_copy(out, true, NULL, NULL, &failed_len)) {
        mca_coll_gpu_report_failure(what, comm, "copy of %zu B from the device failed: %s; "
                                    "taking part with scratch", failed_len, dev_error_string());
        out->fail = OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpu_stage_in(mca_coll_gpu_module_t *module, int slot, const void *user,
                          dev_mem_kind_t kind, ptrdiff_t lo, size_t len, bool copy_in,
                          struct ompi_communicator_t *comm, const char *what,
                          coll_gpu_staged_t *out)
{
    return stage_range(module, slot, user, kind, lo, len, NULL, 0, copy_in, comm, what, out);
}

/* Copy the bounce range back to device memory (when copy_out) and give the bounce memory back. */
static int stage_out(mca_coll_gpu_module_t *module, coll_gpu_staged_t *staged, bool copy_out,
                     struct ompi_communicator_t *comm, const char *what)
{
    size_t failed_len = 0;
    int ret = OMPI_SUCCESS;

    (void) module;
    if (staged->staged && copy_out && OMPI_SUCCESS == staged->fail
        && DEV_OK != mca_coll_gpu_stage_copy(staged, false, NULL, NULL, &failed_len)) {
        mca_coll_gpu_report_failure(what, comm, "copy of %zu B to the device failed: %s",
                                    failed_len, dev_error_string());
        ret = OMPI_ERROR;
    }
    mca_coll_gpu_stage_release(staged);
    return ret;
}

void mca_coll_gpu_stage_release(coll_gpu_staged_t *staged)
{
    if (NULL != staged->owned) {
        if (COLL_GPU_OWNED_MAP == staged->owned_how) {
            (void) munmap(staged->owned, staged->len);
        } else if (COLL_GPU_OWNED_MALLOC == staged->owned_how) {
            free(staged->owned);
        } else {
            mca_coll_gpu_pinned_put(staged->owned, staged->len); /* bounce_get's, of len */
        }
        staged->owned = NULL;
    }
    free(staged->pieces);
    staged->pieces = NULL;
    staged->npieces = 0;
    staged->staged = false;
}

/* stage_range's outcome rc when the list of pieces could not be had (prc): without it the
 * pieces cannot be copied, and the whole span may not be, so the rank takes part with scratch. */
static int pieces_failed(int rc, int prc, coll_gpu_staged_t *out, struct ompi_communicator_t *comm,
                         const char *what)
{
    if (OMPI_SUCCESS == rc && OMPI_SUCCESS != prc && OMPI_SUCCESS == out->fail) {
        mca_coll_gpu_report_failure(what, comm, "out of host memory for the pieces of a %zu B "
                                    "span; taking part with scratch", out->len);
        out->fail = prc;
    }
    return rc;
}

/* Stage a buffer for a host collective.  A span that crosses allocations or memory kinds is
 * copied in pieces (mca_coll_gpu_layout_pieces); kind is the layout's. */
static int stage_buf(mca_coll_gpu_module_t *module, int slot, const void *buf,
                     dev_mem_kind_t kind, coll_gpu_layout_t layout, coll_gpu_dir_t dir,
                     struct ompi_communicator_t *comm, const char *what, coll_gpu_staged_t *out)
{
    coll_gpu_piece_t *pieces = NULL;
    int npieces = 0, prc = OMPI_SUCCESS, rc;
    ptrdiff_t lo;
    size_t len;
    /* the blocks leave holes (v layouts, types with gaps): they go back as they came */
    bool copy_in = 0 != (dir & COLL_GPU_READ) || !layout_dense(layout);

    layout_span(layout, &lo, &len);
    if (!mca_coll_gpu_is_host(kind) && 0 < len) {
        prc = mca_coll_gpu_layout_pieces(buf, layout, lo, len, &pieces, &npieces);
    }
    rc = stage_range(module, slot, buf, kind, lo, len, pieces, npieces,
                     copy_in && OMPI_SUCCESS == prc, comm, what, out);
    out->fill = copy_in; /* what each start of a persistent request copies in */
    return pieces_failed(rc, prc, out, comm, what);
}

/* Block i of a span (side->span): count elements of its type at its byte displacement d
 * from the buffer; false when it is empty. */
static bool span_block(const coll_gpu_side_t *side, int i, coll_gpu_layout_t *layout,
                       ptrdiff_t *d)
{
    if (0 >= side->layout.counts[i]) {
        return false;
    }
    *layout = COLL_GPU_LAYOUT(side->dtypes[i], side->layout.counts[i]);
    *d = (NULL != side->idispls) ? side->idispls[i] : side->adispls[i];
    return true;
}

/* Append block i's pieces (at byte displacement d) to *pieces: those its layout's walk finds
 * (mca_coll_gpu_layout_pieces), or its whole span when that is one allocation's. */
static int span_block_pieces(const char *buf, coll_gpu_layout_t layout, ptrdiff_t d,
                             coll_gpu_piece_t **pieces, int *npieces)
{
    coll_gpu_piece_t *mine = NULL, *grown;
    int n = 0, rc;
    ptrdiff_t lo;
    size_t len;

    mca_coll_gpu_span(layout.dtype, layout.count, &lo, &len);
    rc = mca_coll_gpu_layout_pieces(buf + d, layout, lo, len, &mine, &n);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    grown = realloc(*pieces, (size_t) (*npieces + ((0 < n) ? n : 1)) * sizeof(*grown));
    if (NULL == grown) {
        free(mine);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    *pieces = grown;
    if (0 == n) {
        grown[(*npieces)++] = (coll_gpu_piece_t){
            d + lo, len, mca_coll_gpu_is_host(mca_coll_gpu_layout_kind(buf + d, layout)), NULL,
            0};
    }
    for (int j = 0; j < n; ++j) {
        mine[j].off += d;
        grown[(*npieces)++] = mine[j];
    }
    free(mine);
    return OMPI_SUCCESS;
}

/* A span: staged when some block touches device or managed memory (its kind: the first such
 * block's; MPI_BOTTOM says nothing of it), as one copy when the span lies in one allocation,
 * else in the pieces of its blocks (absolute addresses may lie in allocations of both kinds,
 * with unmapped memory between them, within one block's type too). */
static int stage_span(mca_coll_gpu_module_t *module, int slot, const coll_gpu_side_t *side,
                      struct ompi_communicator_t *comm, const char *what, coll_gpu_staged_t *out)
{
    const char *buf = (const char *) side->buf, *first = buf + side->lo;
    dev_mem_kind_t kind = DEV_MEM_HOST;
    coll_gpu_piece_t *pieces = NULL;
    coll_gpu_layout_t layout;
    int npieces = 0, prc = OMPI_SUCCESS, rc;
    ptrdiff_t d;

    for (int i = 0; i < side->layout.n && mca_coll_gpu_is_host(kind); ++i) {
        if (span_block(side, i, &layout, &d)) {
            kind = mca_coll_gpu_layout_kind(buf + d, layout);
        }
    }
    if (!mca_coll_gpu_is_host(kind) && !in_one_allocation(first, side->len)) {
        for (int i = 0; OMPI_SUCCESS == prc && i < side->layout.n; ++i) {
            if (span_block(side, i, &layout, &d)) {
                prc = span_block_pieces(buf, layout, d, &pieces, &npieces);
            }
        }
        if (OMPI_SUCCESS != prc) {
            free(pieces);
            pieces = NULL;
            npieces = 0;
        }
    }
    rc = stage_range(module, slot, buf, kind, side->lo, side->len, pieces, npieces,
                     OMPI_SUCCESS == prc, comm, what, out);
    return pieces_failed(rc, prc, out, comm, what);
}

/* One side of mca_coll_gpu_stage_sides: left as it is when host memory, MPI_IN_PLACE or not
 * significant here. */
static int stage_side(mca_coll_gpu_module_t *module, int slot, const coll_gpu_side_t *side,
                      struct ompi_communicator_t *comm, const char *what, coll_gpu_staged_t *out)
{
    dev_mem_kind_t kind = DEV_MEM_HOST;

    *out = (coll_gpu_staged_t){.user = (void *) side->buf, .host_base = (char *) side->buf};
    if (side->span) {
        return stage_span(module, slot, side, comm, what, out);
    }
    if (0 != side->dir && MPI_IN_PLACE != side->buf) {
        kind = mca_coll_gpu_layout_kind(side->buf, side->layout);
    }
    return mca_coll_gpu_is_host(kind) ? OMPI_SUCCESS
                                      : stage_buf(module, slot, side->buf, kind, side->layout,
                                                  side->dir, comm, what, out);
}

int mca_coll_gpu_stage_sides(mca_coll_gpu_module_t *module, bool owned, const coll_gpu_side_t *s,
                             const coll_gpu_side_t *r, struct ompi_communicator_t *comm,
                             const char *what, coll_gpu_staged_t *sst, coll_gpu_staged_t *rst)
{
    int rc = stage_side(module, owned ? -1 : 0, s, comm, what, sst);

    if (OMPI_SUCCESS != rc) {
        *rst = (coll_gpu_staged_t){.user = (void *) r->buf, .host_base = (char *) r->buf};
        return rc;
    }
    rc = stage_side(module, owned ? -1 : 1, r, comm, what, rst);
    if (OMPI_SUCCESS != rc) {
        mca_coll_gpu_stage_release(sst);
    }
    return rc;
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
    int out_rc = stage_out(module, staged, copy_out, comm, what);
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
