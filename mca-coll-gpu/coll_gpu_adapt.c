/*
 * coll_gpu_adapt.c - one rank's side of the team path: its buffers in the shape the team moves.
 *
 * Serves MPI_Bcast and MPI_Allreduce on the node team (coll_gpu_engine.c).  Which path a call
 * takes is decided from what every rank shares (the signature, count, op, communicator,
 * parameters: coll_gpu_select.c); what may differ between ranks is handled here, by each rank
 * alone.  The team path moves dense bytes in device memory that peers map through IPC; a rank
 * whose buffer is not that goes through a device temporary of its module:
 *
 *   layout with gaps (vector, indexed, struct, resized ...)   pack / unpack through the host
 *   dense, but managed memory, host memory, or device memory   one device copy each way
 *   the team cannot export (stream-ordered pools, VMM)
 *
 *   pack:    user (device) [lo, lo+len) --copy--> pinned span --convertor pack--> pinned dense
 *            --copy--> device temporary  (a span across allocations or kinds is copied in
 *            pieces, coll_gpu_stage.c)
 *   unpack:  device temporary --copy--> pinned dense; user span --copy--> pinned span (its gaps
 *            keep their bytes) --convertor unpack--> pinned span --copy--> user
 *
 * The pinned memory is the module's staging bounce (coll_gpu_stage.c, slots 0 and 1); the
 * device temporaries (send and receive roles) stay with the module between calls, so that peers
 * map each once (the team's registration cache) rather than on every call.
 */
#include "ompi_config.h"

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

/* Pack or unpack between the user's layout (any memory kind) and the dense device temporary,
 * through the staging bounce (schedule at the top of the file). */
static int adapt_convert(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                         const char *what, const coll_gpu_adapt_t *a, bool pack)
{
    coll_gpu_layout_t layout = COLL_GPU_LAYOUT(a->dtype, a->count);
    coll_gpu_staged_t span, dense;
    opal_convertor_t conv;
    struct iovec iov;
    uint32_t niov = 1;
    size_t max = a->bytes;
    int rc, crc;

    rc = mca_coll_gpu_stage_in(m, 1, a->dev, DEV_MEM_DEVICE, 0, a->bytes, !pack, comm, what,
                               &dense);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    /* unpacking reads the span too: the gaps between elements go back as they were; a span
     * across allocations or kinds moves in pieces, and any device block makes it staged */
    rc = mca_coll_gpu_stage_buf(m, 0, a->user, mca_coll_gpu_layout_kind(a->user, layout), layout,
                                COLL_GPU_READWRITE, comm, what, &span);
    if (OMPI_SUCCESS != rc) {
        (void) mca_coll_gpu_stage_out(m, &dense, false, comm, what);
        return rc;
    }
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    if (pack) {
        crc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor,
                                                       &a->dtype->super, (size_t) a->count,
                                                       mca_coll_gpu_view(&span), 0, &conv);
    } else {
        crc = opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor,
                                                       &a->dtype->super, (size_t) a->count,
                                                       mca_coll_gpu_view(&span), 0, &conv);
    }
    iov.iov_base = mca_coll_gpu_view(&dense);
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
        rc = OMPI_ERROR;
    }
    rc = mca_coll_gpu_unstage(m, &span, rc, pack ? COLL_GPU_NONE : COLL_GPU_WRITE, comm, what);
    return mca_coll_gpu_unstage(m, &dense, rc, pack ? COLL_GPU_WRITE : COLL_GPU_NONE, comm,
                                what);
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
    rc = adapt_tmp_get(m, slot, a->bytes, &a->dev);
    if (DEV_OK != rc) {
        mca_coll_gpu_report_failure(what, comm, "cannot allocate a %zu B device temporary: %s",
                                    a->bytes, dev_error_string());
        a->dev = NULL;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    a->slot = slot;
    if (!copy_in) {
        return OMPI_SUCCESS;
    }
    if (dense) {
        rc = dev_memcpy(a->dev, (const char *) user + lo, a->bytes);
        if (DEV_OK != rc) {
            mca_coll_gpu_report_failure(what, comm, "copy of %zu B into a device temporary: %s",
                                        a->bytes, dev_error_string());
            rc = OMPI_ERROR;
        }
    } else {
        rc = adapt_convert(m, comm, what, a, true);
    }
    if (OMPI_SUCCESS != rc) {
        a->dev = NULL;
    }
    return rc;
}

int mca_coll_gpu_adapt_out(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                           const char *what, const coll_gpu_adapt_t *a, bool copy_out)
{
    ptrdiff_t lo;
    size_t len;

    if (0 > a->slot || !copy_out) {
        return OMPI_SUCCESS;
    }
    mca_coll_gpu_span(a->dtype, (size_t) a->count, &lo, &len);
    if (len == a->bytes && ompi_datatype_is_contiguous_memory_layout(a->dtype, a->count)) {
        if (DEV_OK != dev_memcpy((char *) a->user + lo, a->dev, a->bytes)) {
            mca_coll_gpu_report_failure(what, comm, "copy of %zu B from a device temporary: %s",
                                        a->bytes, dev_error_string());
            return OMPI_ERROR;
        }
        return OMPI_SUCCESS;
    }
    return adapt_convert(m, comm, what, a, false);
}

static int adapt_tmp_named(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                           const char *what, int slot, size_t bytes, void **ptr)
{
    if (DEV_OK != adapt_tmp_get(m, slot, bytes, ptr)) {
        mca_coll_gpu_report_failure(what, comm, "cannot allocate a %zu B device scratch: %s",
                                    bytes, dev_error_string());
        *ptr = NULL;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpu_adapt_scratch(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                               const char *what, size_t bytes, void **ptr)
{
    return adapt_tmp_named(m, comm, what, 2, bytes, ptr);
}

int mca_coll_gpu_adapt_landing(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                               const char *what, size_t bytes, void **ptr)
{
    return adapt_tmp_named(m, comm, what, 3, bytes, ptr);
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
