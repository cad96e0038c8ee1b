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
 * A span need not be one piece of memory: a type of absolute addresses (MPI_BOTTOM; the fields
 * of a struct of arrays) may have its blocks in several allocations, megabytes apart or more,
 * some in host memory, with unmapped memory or other allocations between them.  Copying such a
 * span whole fails (CUDA and the emulated device refuse a copy past the end of an allocation)
 * or faults.  So a span that is not inside one device allocation is copied in pieces
 * (mca_coll_gpu_layout_pieces): one per device or managed allocation (its blocks' span there,
 * gaps included) and one per run of host blocks (memcpy).  The bounce memory still covers the
 * whole span, so that the host collective sees the same layout at the same offsets; where the
 * pieces fill little of it, it is an anonymous mapping whose pages come only where they go.
 *
 *   user     [A: device ...]      (other memory)      [B: host]     (other)    [C: device]
 *   bounce   [ piece A      ]........untouched........[piece B]...............[piece C ]
 *
 * A rank whose layout has any device block is a device rank, even where its first byte is host
 * memory (mca_coll_gpu_layout_kind): the host collective must never see device memory.
 *
 * Each communicator's module keeps two pinned bounce buffers (send and receive roles) up to
 * coll_gpu_stage_cache_bytes; larger calls take theirs from the process's pinned pool
 * (coll_gpu_pinned_pool.c), and so does every nonblocking and persistent collective (slot -1:
 * its bounce memory lives until its request completes, or is freed).  When
 * no pinned memory can be had, plain host memory serves (slower copies, same result); when
 * not even that can be had, the rank takes part with scratch and fails the call (below).
 * Serves every collective of coll/gpu that the GPU path does not take: which buffers each one
 * stages on which rank, and how each mode completes, is coll_gpu_staged_colls.c's table and path.
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

/* The byte range touched by blocks counts[i] at displacements displs[i] (in extents) of dtype
 * for i < n, for the v collectives. */
static void span_v(ompi_datatype_t *dtype, int n, const int *counts, const int *displs,
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

/* ---- layouts that cross allocations and memory kinds ------------------------------------- */

/* The span of a layout (its v blocks' union, or count elements). */
static void layout_span(coll_gpu_layout_t layout, ptrdiff_t *lo, size_t *len)
{
    if (0 < layout.n) {
        span_v(layout.dtype, layout.n, layout.counts, layout.displs, lo, len);
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

/* A memory kind holds for a whole page (CUDA and the emulated device map whole pages; the
 * classification cache keeps 4 KiB pages too): the runs of a layout that start on the page
 * last classified take its answer. */
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

/*
 * Call fn for every run of contiguous bytes that layout touches at buf, in the datatype's
 * order: Open MPI's convertor lists them from the type's description (raw mode: nothing is read
 * or written).  Returns fn's first non-zero answer, 0 when every run was seen, or WALK_UNSURE
 * when the convertor could not be set up or its runs do not add up to the layout's bytes (the
 * caller then keeps to the first byte's kind and the whole span, as before the walk existed).
 */
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

/* layout_walk's state for a kind: the first run that is not host memory ends the walk. */
typedef struct {
    kind_memo_t memo;
    dev_mem_kind_t kind;
} kind_walk_t;

static int kind_visit(void *ctx, char *p, size_t n)
{
    kind_walk_t *w = (kind_walk_t *) ctx;

    (void) n; /* a run lies in one allocation, or the program is erroneous */
    w->kind = memo_classify(&w->memo, p);
    return mca_coll_gpu_is_host(w->kind) ? 0 : 1;
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
    kind_walk_t w;
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
    w.memo.page = UINTPTR_MAX;
    w.kind = kind;
    if (WALK_UNSURE == layout_walk(buf, layout, kind_visit, &w)) {
        return kind;
    }
    return w.kind;
}

/* layout_walk's state for the pieces: the list, and the device allocations met so far with
 * the piece that covers each. */
typedef struct {
    const char *user;
    kind_memo_t memo;
    coll_gpu_piece_t *pieces;
    int n, cap;
    int last_host; /* the piece of the last host run, -1: none */
    struct {
        const char *base;
        size_t size;
        int piece;
    } *allocs;
    int nallocs, alloc_cap;
} pieces_walk_t;

#define PIECES_NOMEM 2

/* Grow an array of elements of size to hold one more; false when no memory. */
static bool grow(void **array, int *cap, int n, size_t size)
{
    void *p;
    int want = (0 == *cap) ? 8 : 2 * *cap;

    if (n < *cap) {
        return true;
    }
    p = realloc(*array, (size_t) want * size);
    if (NULL == p) {
        return false;
    }
    *array = p;
    *cap = want;
    return true;
}

static int pieces_visit(void *ctx, char *p, size_t n)
{
    pieces_walk_t *w = (pieces_walk_t *) ctx;
    ptrdiff_t off = p - w->user;
    coll_gpu_piece_t *piece;
    void *base;
    size_t size;
    uint64_t id;
    int a;

    if (mca_coll_gpu_is_host(memo_classify(&w->memo, p))) {
        /* a run that starts inside the last host piece, or right after it, extends it */
        piece = (0 <= w->last_host) ? &w->pieces[w->last_host] : NULL;
        if (NULL != piece && off >= piece->off && off <= piece->off + (ptrdiff_t) piece->len) {
            if (off + (ptrdiff_t) n > piece->off + (ptrdiff_t) piece->len) {
                piece->len = (size_t) (off + (ptrdiff_t) n - piece->off);
            }
            return 0;
        }
        if (!grow((void **) &w->pieces, &w->cap, w->n, sizeof(*w->pieces))) {
            return PIECES_NOMEM;
        }
        w->pieces[w->n] = (coll_gpu_piece_t){off, n, true};
        w->last_host = w->n++;
        return 0;
    }
    /* device or managed memory: the piece of its allocation grows to cover the run */
    for (a = w->nallocs - 1; a >= 0; --a) {
        if (p >= w->allocs[a].base && p < w->allocs[a].base + w->allocs[a].size) {
            piece = &w->pieces[w->allocs[a].piece];
            if (off < piece->off) {
                piece->len += (size_t) (piece->off - off);
                piece->off = off;
            }
            if (off + (ptrdiff_t) n > piece->off + (ptrdiff_t) piece->len) {
                piece->len = (size_t) (off + (ptrdiff_t) n - piece->off);
            }
            return 0;
        }
    }
    if (DEV_OK != dev_mem_range(p, &base, &size, &id)) {
        base = p; /* memory the device layer cannot place: this run alone */
        size = n;
    }
    if (!grow((void **) &w->pieces, &w->cap, w->n, sizeof(*w->pieces))
        || !grow((void **) &w->allocs, &w->alloc_cap, w->nallocs, sizeof(*w->allocs))) {
        return PIECES_NOMEM;
    }
    w->pieces[w->n] = (coll_gpu_piece_t){off, n, false};
    w->allocs[w->nallocs].base = (const char *) base;
    w->allocs[w->nallocs].size = size;
    w->allocs[w->nallocs++].piece = w->n++;
    return 0;
}

int mca_coll_gpu_layout_pieces(const void *buf, coll_gpu_layout_t layout, ptrdiff_t lo,
                               size_t len, coll_gpu_piece_t **pieces, int *npieces)
{
    const char *first = (const char *) buf + lo;
    pieces_walk_t w;
    int rc;

    *pieces = NULL;
    *npieces = 0;
    if (0 == len || !mca_coll_gpu_component.dev_opened || layout_dense(layout)) {
        return OMPI_SUCCESS;
    }
    if (!mca_coll_gpu_is_host(mca_coll_gpu_classify(first))) {
        void *base;
        size_t size;
        uint64_t id;
        /* the common case: the whole span in the first byte's allocation, one copy */
        if (DEV_OK == dev_mem_range(first, &base, &size, &id) && first >= (const char *) base
            && len <= size - (size_t) (first - (const char *) base)) {
            return OMPI_SUCCESS;
        }
    }
    memset(&w, 0, sizeof(w));
    w.user = (const char *) buf;
    w.memo.page = UINTPTR_MAX;
    w.last_host = -1;
    rc = layout_walk(buf, layout, pieces_visit, &w);
    free(w.allocs);
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
    coll_gpu_piece_t whole = {lo, len, false};

    if (NULL == pieces) {
        pieces = &whole;
        npieces = 1;
    }
    for (int i = 0; i < npieces; ++i) {
        char *u = (char *) user + pieces[i].off, *h = image + pieces[i].off;
        int rc;

        if (pieces[i].host) {
            memcpy(to_image ? h : u, to_image ? u : h, pieces[i].len);
            continue;
        }
        if (NULL != stream) {
            rc = to_image ? dev_memcpy_async(h, u, pieces[i].len, stream)
                          : dev_memcpy_async(u, h, pieces[i].len, stream);
            *enqueued += (DEV_OK == rc);
        } else {
            rc = to_image ? dev_memcpy(h, u, pieces[i].len) : dev_memcpy(u, h, pieces[i].len);
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

int mca_coll_gpu_stage_copy(const coll_gpu_staged_t *staged, bool to_bounce, size_t *failed_len)
{
    return mca_coll_gpu_pieces_copy(staged->user, staged->host_base, staged->lo, staged->len,
                                    staged->pieces, staged->npieces, to_bounce, failed_len);
}

int mca_coll_gpu_stage_copy_back_on(const coll_gpu_staged_t *staged, dev_stream_t *stream,
                                    int *enqueued, size_t *failed_len)
{
    return pieces_copy_on(staged->user, staged->host_base, staged->lo, staged->len,
                          staged->pieces, staged->npieces, false, stream, enqueued, failed_len);
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
    static int target = -2;

    return mca_coll_gpu_test_env_names_me("COLL_GPU_TEST_FAIL_STAGE", &target);
}

/* Bounce memory for a span of len bytes, or scratch to take part with: see
 * mca_coll_gpu_stage_in.  pieces (NULL: one copy of the span) is the list the span is copied
 * in; out owns it from here on (stage_out frees it). */
static int stage_range(mca_coll_gpu_module_t *module, int slot, const void *user,
                       dev_mem_kind_t kind, ptrdiff_t lo, size_t len, coll_gpu_piece_t *pieces,
                       int npieces, bool copy_in, struct ompi_communicator_t *comm,
                       const char *what, coll_gpu_staged_t *out)
{
    void *bounce = NULL;
    size_t data = 0, failed_len = 0;
    bool inject, sparse;
    int rc;

    out->user = (void *) user;
    out->lo = lo;
    out->len = len;
    out->owned = NULL;
    out->owned_malloc = false;
    out->owned_map = 0;
    out->pieces = pieces;
    out->npieces = npieces;
    out->slot = slot;
    out->fail = OMPI_SUCCESS;
    out->fill = copy_in;
    out->staged = !mca_coll_gpu_is_host(kind) && 0 < len;
    out->host_base = (char *) user;
    if (!out->staged) {
        free(pieces);
        out->pieces = NULL;
        out->npieces = 0;
        return OMPI_SUCCESS;
    }
    for (int i = 0; i < npieces; ++i) {
        data += pieces[i].len;
    }
    /* Pieces that fill little of their span (blocks megabytes apart) would pin the whole span
     * for this call alone: anonymous pages serve instead, given only where the pieces go.  A
     * module's cached slot, pinned once, still serves the spans that fit it. */
    sparse = NULL != pieces && data <= len / 2
             && (0 > slot || len > mca_coll_gpu_component.stage_cache_bytes);
    /* testing only: no pinned and no plain memory (coll_gpu_test_fail_alloc_site stage) */
    inject = mca_coll_gpu_test_fail_alloc("stage");
    if (inject) {
        rc = DEV_ERR_NOMEM;
    } else if (sparse) {
        bounce = mmap(NULL, len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        rc = (MAP_FAILED == bounce) ? DEV_ERR_NOMEM : DEV_OK;
        if (DEV_OK == rc) {
            out->owned = bounce;
            out->owned_map = len;
        }
    } else {
        rc = bounce_get(module, slot, len, &bounce, &out->owned);
    }
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
                free(pieces);
                out->pieces = NULL;
                out->npieces = 0;
                return OMPI_ERR_OUT_OF_RESOURCE;
            }
            mca_coll_gpu_report_failure(what, comm, "cannot allocate %zu B of host memory for "
                                        "staging%s; taking part with scratch", len,
                                        inject ? " (coll_gpu_test_fail_alloc, test only)" : "");
            out->owned = map;
            out->owned_map = len;
            out->fail = OMPI_ERR_OUT_OF_RESOURCE;
            bounce = map;
        } else {
            out->owned_malloc = true;
            bounce = out->owned;
        }
    }
    out->host_base = (char *) bounce - lo;
    if (OMPI_SUCCESS != out->fail) {
        /* scratch: nothing of the user's goes in (and nothing comes back) */
    } else if (stage_fail_injected()) {
        mca_coll_gpu_report_failure(what, comm, "staging of %zu B failed: injected by "
                                    "COLL_GPU_TEST_FAIL_STAGE (test only); taking part with "
                                    "scratch", len);
        out->fail = OMPI_ERROR;
    } else if (copy_in) {
        rc = mca_coll_gpu_stage_copy(out, true, &failed_len);
        if (DEV_OK != rc) {
            mca_coll_gpu_report_failure(what, comm, "copy of %zu B from the device failed: %s; "
                                        "taking part with scratch", failed_len,
                                        dev_error_string());
            out->fail = OMPI_ERROR;
        }
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

int mca_coll_gpu_stage_out(mca_coll_gpu_module_t *module, coll_gpu_staged_t *staged,
                           bool copy_out, struct ompi_communicator_t *comm, const char *what)
{
    size_t failed_len = 0;
    int ret = OMPI_SUCCESS;

    (void) module;
    if (!staged->staged) {
        return OMPI_SUCCESS;
    }
    if (copy_out && OMPI_SUCCESS == staged->fail) {
        int rc = mca_coll_gpu_stage_copy(staged, false, &failed_len);
        if (DEV_OK != rc) {
            mca_coll_gpu_report_failure(what, comm, "copy of %zu B to the device failed: %s",
                                        failed_len, dev_error_string());
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
    free(staged->pieces);
    staged->pieces = NULL;
    staged->npieces = 0;
    staged->staged = false;
}

int mca_coll_gpu_stage_buf(mca_coll_gpu_module_t *module, int slot, const void *buf,
                           dev_mem_kind_t kind, coll_gpu_layout_t layout, coll_gpu_dir_t dir,
                           struct ompi_communicator_t *comm, const char *what,
                           coll_gpu_staged_t *out)
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
    if (OMPI_SUCCESS == rc && OMPI_SUCCESS != prc && OMPI_SUCCESS == out->fail) {
        /* without the list its pieces cannot be copied, and the whole span may not be */
        mca_coll_gpu_report_failure(what, comm, "out of host memory for the pieces of a %zu B "
                                    "span; taking part with scratch", len);
        out->fail = prc;
    }
    out->fill = copy_in; /* what each start of a persistent request copies in */
    return rc;
}

/* Leave a buffer as it is (host memory, MPI_IN_PLACE, or not significant here). */
static void stage_none(const void *buf, coll_gpu_staged_t *out)
{
    memset(out, 0, sizeof(*out));
    out->user = (void *) buf;
    out->host_base = (char *) buf;
}

/* One side of mca_coll_gpu_stage_sides. */
static int stage_side(mca_coll_gpu_module_t *module, int slot, const coll_gpu_side_t *side,
                      struct ompi_communicator_t *comm, const char *what, coll_gpu_staged_t *out)
{
    dev_mem_kind_t kind;

    stage_none(side->buf, out);
    if (side->span) {
        return stage_range(module, slot, side->buf, mca_coll_gpu_classify(side->buf), side->lo,
                           side->len, NULL, 0, true, comm, what, out);
    }
    if (0 == side->dir || MPI_IN_PLACE == side->buf) {
        return OMPI_SUCCESS;
    }
    kind = mca_coll_gpu_layout_kind(side->buf, side->layout);
    if (mca_coll_gpu_is_host(kind)) {
        return OMPI_SUCCESS;
    }
    return mca_coll_gpu_stage_buf(module, slot, side->buf, kind, side->layout, side->dir, comm,
                                  what, out);
}

int mca_coll_gpu_stage_sides(mca_coll_gpu_module_t *module, bool owned, const coll_gpu_side_t *s,
                             const coll_gpu_side_t *r, struct ompi_communicator_t *comm,
                             const char *what, coll_gpu_staged_t *sst, coll_gpu_staged_t *rst)
{
    int rc = stage_side(module, owned ? -1 : 0, s, comm, what, sst);

    if (OMPI_SUCCESS != rc) {
        stage_none(r->buf, rst);
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
