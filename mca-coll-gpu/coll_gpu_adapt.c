/*
 * coll_gpu_adapt.c - one rank's side of the team path: its buffers in the shape the team moves.
 *
 * Serves every call on the node team, blocking and nonblocking (coll_gpu_engine.c and the
 * entries).  Which path a call takes is decided from what every rank shares (the signature,
 * count, op, communicator, parameters: coll_gpu_select.c); what may differ between ranks is
 * handled here, by each rank alone.  The team path moves dense bytes in device memory that
 * peers map through IPC; a rank whose buffer is not that goes through a device temporary:
 *
 *   layout with gaps (vector, indexed, struct, resized ...)   pack / unpack through the host
 *   dense, but managed memory, host memory, or device memory   one device copy each way
 *   the team cannot export (stream-ordered pools, VMM)
 *
 *   pack:    user [lo, lo+len) --copy--> host span --convertor pack--> host dense --copy-->
 *            device temporary  (a span across allocations or kinds is copied in pieces,
 *            coll_gpu_stage.c)
 *   unpack:  device temporary --copy--> host dense; user span --copy--> host span (its gaps
 *            keep their bytes) --convertor unpack--> host span --copy--> user
 *
 * The temporary is the module's (a slot kept between calls, so that peers map it once rather
 * than on every call: the blocking calls, one at a time on a communicator) or the call's own
 * (COLL_GPU_ADAPT_OWN: a request's, freed at its end; nonblocking calls overlap).  The host
 * memory of a conversion is the call's own, never the module's bounce or the pinned pool: a
 * request is unpacked inside progress, maybe while a blocking call of the communicator holds
 * those.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <sys/uio.h>

#include "opal/datatype/opal_convertor.h"

#include "coll_gpu.h"

/* The smallest device temporary allocated: calls of a few bytes should not each grow it. */
#define ADAPT_TMP_MIN ((size_t) 64 << 10)

/* The module's device temporary of a role, at least bytes long. */
static int adapt_tmp_get(mca_coll_gpu_module_t *m, int slot, size_t bytes, void **ptr)
{
    coll_gpu_bounce_t *b = &m->dev_tmp[slot];
    size_t want = (b->size < ADAPT_TMP_MIN) ? ADAPT_TMP_MIN : b->size;
    int rc;

    if (NULL != b->ptr && bytes <= b->size) {
        *ptr = b->ptr;
        return DEV_OK;
    }
    while (want < bytes) {
        want *= 2;
    }
    if (NULL != b->ptr) {
        (void) dev_mem_free(b->ptr);
        b->ptr = NULL;
        b->size = 0;
    }
    rc = dev_mem_alloc(&b->ptr, want);
    if (DEV_OK != rc && want > bytes) {
        want = bytes; /* the doubling overshot what the device has left */
        rc = dev_mem_alloc(&b->ptr, want);
    }
    if (DEV_OK != rc) {
        b->ptr = NULL;
        return rc;
    }
    b->size = want;
    *ptr = b->ptr;
    return DEV_OK;
}

void mca_coll_gpu_adapt_release(mca_coll_gpu_module_t *m)
{
    for (size_t i = 0; i < sizeof(m->dev_tmp) / sizeof(m->dev_tmp[0]); ++i) {
        if (NULL != m->dev_tmp[i].ptr) {
            (void) dev_mem_free(m->dev_tmp[i].ptr);
        }
        m->dev_tmp[i].ptr = NULL;
        m->dev_tmp[i].size = 0;
    }
}

/* Pack (a->dev from the user's layout) or unpack (the other way), through host memory of its
 * own (schedule at the top of the file).  A failure is reported. */
static int adapt_convert(struct ompi_communicator_t *comm, const char *what,
                         const coll_gpu_adapt_t *a, bool pack)
{
    static int fail_target = -2;
    coll_gpu_piece_t *pieces = NULL;
    int npieces = 0;
    ptrdiff_t lo;
    size_t len, max = a->bytes, failed_len = 0;
    char *span, *dense;
    opal_convertor_t conv;
    struct iovec iov;
    uint32_t niov = 1;
    int rc = OMPI_ERROR, crc;

    mca_coll_gpu_span(a->dtype, (size_t) a->count, &lo, &len);
    span = malloc(len);
    dense = malloc(a->bytes);
    /* test only: COLL_GPU_TEST_FAIL_STAGE=<rank in MPI_COMM_WORLD> fails this process's
     * conversions, as it fails its staging copies (coll_gpu_stage.c) */
    if (mca_coll_gpu_test_env_names_me("COLL_GPU_TEST_FAIL_STAGE", &fail_target)) {
        mca_coll_gpu_report_failure(what, comm, "staging of %zu B failed: injected by "
                                    "COLL_GPU_TEST_FAIL_STAGE (test only)", len);
        goto out;
    }
    /* unpacking reads the span too: the gaps between elements go back as they were */
    if (NULL == span || NULL == dense
        || OMPI_SUCCESS != mca_coll_gpu_layout_pieces(a->user, COLL_GPU_LAYOUT(a->dtype, a->count),
                                                      lo, len, &pieces, &npieces)
        || DEV_OK != mca_coll_gpu_pieces_copy(a->user, span - lo, lo, len, pieces, npieces, true,
                                              &failed_len)
        || (!pack && DEV_OK != dev_memcpy(dense, a->dev, a->bytes))) {
        mca_coll_gpu_report_failure(what, comm, "cannot %s %zu B of datatype %s: %s",
                                    pack ? "pack" : "unpack", a->bytes, a->dtype->name,
                                    (NULL == span || NULL == dense) ? "out of host memory"
                                                                    : dev_error_string());
        goto out;
    }
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    if (pack) {
        crc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor,
                                                       &a->dtype->super, (size_t) a->count,
                                                       span - lo, 0, &conv);
    } else {
        crc = opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor,
                                                       &a->dtype->super, (size_t) a->count,
                                                       span - lo, 0, &conv);
    }
    iov.iov_base = dense;
    iov.iov_len = a->bytes;
    if (OPAL_SUCCESS == crc) {
        crc = pack ? opal_convertor_pack(&conv, &iov, &niov, &max)
                   : opal_convertor_unpack(&conv, &iov, &niov, &max);
    }
    OBJ_DESTRUCT(&conv);
    /* the convertor answers 1 when it converted everything */
    if (1 != crc || max != a->bytes) {
        mca_coll_gpu_report_failure(what, comm, "cannot %s %zu B of datatype %s (%d, %zu B done)",
                                    pack ? "pack" : "unpack", a->bytes, a->dtype->name, crc,
                                    max);
    } else if (pack ? DEV_OK != dev_memcpy(a->dev, dense, a->bytes)
                    : DEV_OK != mca_coll_gpu_pieces_copy(a->user, span - lo, lo, len, pieces,
                                                         npieces, false, &failed_len)) {
        mca_coll_gpu_report_failure(what, comm, "copy of %zu B %s a device temporary: %s",
                                    pack ? a->bytes : failed_len, pack ? "into" : "from",
                                    dev_error_string());
    } else {
        rc = OMPI_SUCCESS;
    }
out:
    free(pieces);
    free(span);
    free(dense);
    return rc;
}

int mca_coll_gpu_adapt_tmp(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                           const char *what, int slot, size_t bytes, void **ptr)
{
    int rc = (COLL_GPU_ADAPT_OWN == slot) ? dev_mem_alloc(ptr, bytes)
                                          : adapt_tmp_get(m, slot, bytes, ptr);

    if (DEV_OK != rc) {
        mca_coll_gpu_report_failure(what, comm, "cannot allocate a %zu B device temporary: %s",
                                    bytes, dev_error_string());
        *ptr = NULL;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpu_adapt_in(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                          const char *what, int slot, const void *user, int count,
                          struct ompi_datatype_t *dtype, bool copy_in, bool exported,
                          coll_gpu_adapt_t *a)
{
    ptrdiff_t lo;
    size_t len;
    bool dense;
    int rc;

    a->user = (void *) user;
    a->count = count;
    a->dtype = dtype;
    a->bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count);
    a->slot = -1;
    mca_coll_gpu_span(dtype, (size_t) count, &lo, &len);
    a->dev = (char *) user + lo;
    dense = (0 == count)
            || (len == a->bytes && ompi_datatype_is_contiguous_memory_layout(dtype, count));
    if (0 == a->bytes
        || (dense && DEV_MEM_DEVICE == mca_coll_gpu_classify(a->dev)
            && (!exported || dev_mem_ipc_capable(a->dev)))) {
        return OMPI_SUCCESS;
    }
    rc = mca_coll_gpu_adapt_tmp(m, comm, what, slot, a->bytes, &a->dev);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    a->slot = slot;
    if (!copy_in) {
        return OMPI_SUCCESS;
    }
    if (!dense) {
        rc = adapt_convert(comm, what, a, true);
    } else if (DEV_OK != dev_memcpy(a->dev, (const char *) user + lo, a->bytes)) {
        mca_coll_gpu_report_failure(what, comm, "copy of %zu B into a device temporary: %s",
                                    a->bytes, dev_error_string());
        rc = OMPI_ERROR;
    }
    if (OMPI_SUCCESS != rc) {
        (void) mca_coll_gpu_adapt_out(m, comm, what, a, false); /* an own temporary goes */
        a->dev = NULL;
        a->slot = -1;
    }
    return rc;
}

int mca_coll_gpu_adapt_out(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                           const char *what, coll_gpu_adapt_t *a, bool copy_out)
{
    ptrdiff_t lo;
    size_t len;
    int rc = OMPI_SUCCESS;

    (void) m;
    if (-1 == a->slot) {
        return OMPI_SUCCESS; /* the user's memory itself */
    }
    if (copy_out && NULL != a->dev) {
        mca_coll_gpu_span(a->dtype, (size_t) a->count, &lo, &len);
    }
    if (!copy_out || NULL == a->dev) {
        /* nothing goes back */
    } else if (len != a->bytes
               || !ompi_datatype_is_contiguous_memory_layout(a->dtype, a->count)) {
        rc = adapt_convert(comm, what, a, false);
    } else if (DEV_OK != dev_memcpy((char *) a->user + lo, a->dev, a->bytes)) {
        mca_coll_gpu_report_failure(what, comm, "copy of %zu B from a device temporary: %s",
                                    a->bytes, dev_error_string());
        rc = OMPI_ERROR;
    }
    if (COLL_GPU_ADAPT_OWN == a->slot) {
        (void) dev_mem_free(a->dev);
        a->dev = NULL;
        a->slot = -1;
    }
    return rc;
}

int mca_coll_gpu_adapt_scratch(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                               const char *what, size_t bytes, void **ptr)
{
    return mca_coll_gpu_adapt_tmp(m, comm, what, 2, bytes, ptr);
}

int mca_coll_gpu_adapt_copy(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            const char *what, const void *src, int scount,
                            struct ompi_datatype_t *sdtype, void *dst, int rcount,
                            struct ompi_datatype_t *rdtype)
{
    size_t sbytes = mca_coll_gpu_call_bytes(sdtype, (size_t) scount);
    size_t rbytes = mca_coll_gpu_call_bytes(rdtype, (size_t) rcount);
    coll_gpu_adapt_t s, r;
    int rc;

    if (sbytes != rbytes) {
        mca_coll_gpu_report_failure(what, comm, "%zu B to copy into %zu B (the type signatures "
                                    "differ)", sbytes, rbytes);
        return MPI_ERR_TRUNCATE;
    }
    rc = mca_coll_gpu_adapt_in(m, comm, what, 0, src, scount, sdtype, true, false, &s);
    if (OMPI_SUCCESS == rc) {
        rc = mca_coll_gpu_adapt_in(m, comm, what, 1, dst, rcount, rdtype, false, false, &r);
    }
    if (OMPI_SUCCESS == rc && 0 < rbytes && DEV_OK != dev_memcpy(r.dev, s.dev, rbytes)) {
        mca_coll_gpu_report_failure(what, comm, "copy of %zu B on the device: %s", rbytes,
                                    dev_error_string());
        rc = OMPI_ERROR;
    }
    if (OMPI_SUCCESS == rc) {
        rc = mca_coll_gpu_adapt_out(m, comm, what, &r, true);
    }
    return rc;
}
