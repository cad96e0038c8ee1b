/*
 * coll_gpu_reduce.c - the reductions other than allreduce: MPI_Reduce, MPI_Reduce_scatter,
 * MPI_Reduce_scatter_block, MPI_Scan, MPI_Exscan, and the local one, MPI_Reduce_local.
 *
 * Each has one shape: a send buffer read, a receive buffer written (read and written with
 * MPI_IN_PLACE).  Host buffers go to the saved module; anything else is staged.
 *
 * On an intercommunicator MPI_Reduce's root passes MPI_ROOT and only receives, the other ranks
 * of its group pass MPI_PROC_NULL and take no part, and the remote group only sends; the
 * reduce-scatters count the LOCAL group (each group's result is scattered over the other).
 */
#include "ompi_config.h"

#include <string.h>

#include "coll_gpu.h"

/* MPI_Reduce once the path is known: host buffers to the saved module, anything else staged. */
static int reduce_body(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                       struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                       mca_coll_gpu_module_t *m, coll_gpu_dir_t sdir, coll_gpu_dir_t rdir)
{
    static const char *const name = "reduce";
    coll_gpu_staged_t s, r;
    int rc;

    /* the receive buffer means something at the root only; the kind of the elements' memory,
     * not of the pointers */
    if ((!sdir || mca_coll_gpu_data_host(sbuf, dtype, count))
        && (!rdir || mca_coll_gpu_data_host(rbuf, dtype, count))) {
        return m->prev_reduce.fn(sbuf, rbuf, count, dtype, op, root, comm, m->prev_reduce.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op,
                          "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, count), sdir, rbuf,
                                 COLL_GPU_LAYOUT(dtype, count), rdir, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_reduce.fn(mca_coll_gpu_view(&s), mca_coll_gpu_view(&r), count, dtype, op, root,
                           comm, m->prev_reduce.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, sdir, &r, rdir);
}

int mca_coll_gpu_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                        struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    static const char *const name = "reduce";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    /* an intercommunicator's root and its idle group send nothing */
    coll_gpu_dir_t sdir = (mca_coll_gpu_is_idle(root) || (OMPI_COMM_IS_INTER(comm) && is_root))
                              ? COLL_GPU_NONE
                              : COLL_GPU_READ;
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_kinds_call_t call;
    bool host, all_device;
    int rc;

    if (m->inter || m->in_agreed_call) {
        return reduce_body(sbuf, rbuf, count, dtype, op, root, comm, m, sdir, rdir);
    }
    /* On an intracommunicator the ranks note their kinds for the communicator's agreement as
     * for MPI_Allreduce (coll_gpu_kinds.c), though a reduce never takes the GPU path: the
     * nonblocking allreduces and bcasts after it follow what it found (a benchmark's
     * statistics often come first).  Nested calls of the saved module go straight through. */
    host = (!sdir || mca_coll_gpu_data_host(sbuf, dtype, count))
           && (!rdir || mca_coll_gpu_data_host(rbuf, dtype, count));
    if (host && COLL_GPU_KMODE_BOARD == m->kmode && !mca_coll_gpu_component.uniform_buffers) {
        /* the hot path of host buffers: a note on the board, no wait (coll_gpu_kinds.c) */
        mca_coll_gpu_kinds_publish_host(m);
        return m->prev_reduce.fn(sbuf, rbuf, count, dtype, op, root, comm, m->prev_reduce.module);
    }
    call = (coll_gpu_kinds_call_t){.coll = COLL_GPU_KINDS_REDUCE,
                                   .device = !host,
                                   .bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count),
                                   .root = root};
    rc = mca_coll_gpu_kinds_agree(m, comm, name, &call, &all_device);
    if (OMPI_SUCCESS == rc) {
        rc = reduce_body(sbuf, rbuf, count, dtype, op, root, comm, m, sdir, rdir);
    }
    return rc;
}

int mca_coll_gpu_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "reduce_scatter";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    coll_gpu_dir_t rdir = in_place ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    coll_gpu_staged_t s, r;
    size_t total = 0;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_reduce_scatter.fn(sbuf, rbuf, rcounts, dtype, op, comm,
                                         m->prev_reduce_scatter.module);
    }
    for (int i = 0; i < size; ++i) {
        total += (size_t) rcounts[i];
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(dtype, total), dtype, op,
                          "staged");
    /* in place, the receive buffer holds the whole input and gets this rank's block */
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, total),
                                 COLL_GPU_READ, rbuf,
                                 COLL_GPU_LAYOUT(dtype, in_place ? total : (size_t) rcounts[rank]),
                                 rdir, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_reduce_scatter.fn(mca_coll_gpu_view(&s), mca_coll_gpu_view(&r), rcounts, dtype,
                                   op, comm, m->prev_reduce_scatter.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r, rdir);
}

int mca_coll_gpu_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                      struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm,
                                      mca_coll_base_module_t *module)
{
    static const char *const name = "reduce_scatter_block";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    coll_gpu_dir_t rdir = in_place ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t total = (size_t) rcount * (size_t) ompi_comm_size(comm);
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_reduce_scatter_block.fn(sbuf, rbuf, rcount, dtype, op, comm,
                                               m->prev_reduce_scatter_block.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(dtype, total), dtype, op,
                          "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, total),
                                 COLL_GPU_READ, rbuf,
                                 COLL_GPU_LAYOUT(dtype, in_place ? total : (size_t) rcount), rdir,
                                 &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_reduce_scatter_block.fn(mca_coll_gpu_view(&s), mca_coll_gpu_view(&r), rcount,
                                         dtype, op, comm, m->prev_reduce_scatter_block.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r, rdir);
}

int mca_coll_gpu_reduce_like_staged(const char *name, mca_coll_base_module_scan_fn_t prev_fn,
                                    mca_coll_base_module_t *prev_module, const void *sbuf,
                                    void *rbuf, int count, struct ompi_datatype_t *dtype,
                                    struct ompi_op_t *op, struct ompi_communicator_t *comm,
                                    mca_coll_gpu_module_t *m)
{
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_staged_t s, r;
    int rc;

    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, count),
                                 COLL_GPU_READ, rbuf, COLL_GPU_LAYOUT(dtype, count), rdir, &s,
                                 &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = prev_fn(mca_coll_gpu_view(&s), mca_coll_gpu_view(&r), count, dtype, op, comm,
                 prev_module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r, rdir);
}

/* MPI_Scan and MPI_Exscan: host buffers to the saved module, anything else staged. */
static int scan_like(const char *name, mca_coll_base_module_scan_fn_t prev_fn,
                     mca_coll_base_module_t *prev_module, const void *sbuf, void *rbuf, int count,
                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                     struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    /* the kind of the elements' memory, not of the pointers (MPI_BOTTOM) */
    if (mca_coll_gpu_data_host(sbuf, dtype, count) && mca_coll_gpu_data_host(rbuf, dtype, count)) {
        return prev_fn(sbuf, rbuf, count, dtype, op, comm, prev_module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op,
                          "staged");
    return mca_coll_gpu_reduce_like_staged(name, prev_fn, prev_module, sbuf, rbuf, count, dtype,
                                           op, comm, m);
}

int mca_coll_gpu_scan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    return scan_like("scan", m->prev_scan.fn, m->prev_scan.module, sbuf, rbuf, count, dtype, op,
                     comm, m);
}

int mca_coll_gpu_exscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                        struct ompi_op_t *op, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;

    /* alone, rank 0's result is undefined: nothing to do (and coll/basic 4.1 sends to a rank
     * that does not exist there) */
    if (1 == ompi_comm_size(comm)) {
        return OMPI_SUCCESS;
    }
    return scan_like("exscan", m->prev_exscan.fn, m->prev_exscan.module, sbuf, rbuf, count,
                     dtype, op, comm, m);
}

/* MPI_Reduce_local (inoutbuf = inbuf op inoutbuf), which Open MPI routes through
 * MPI_COMM_SELF's table: host buffers to the saved function, anything else staged.  A local
 * call that threads may make at the same time on the same communicator: each call stages
 * through memory of its own, never the module's bounce buffers. */
int mca_coll_gpu_reduce_local(const void *inbuf, void *inoutbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              mca_coll_base_module_t *module)
{
    static const char *const name = "reduce_local";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    struct ompi_communicator_t *self = &ompi_mpi_comm_self.comm;
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_data_host(inbuf, dtype, count)
        && mca_coll_gpu_data_host(inoutbuf, dtype, count)) {
        return m->prev_reduce_local.fn(inbuf, inoutbuf, count, dtype, op,
                                       m->prev_reduce_local.module);
    }
    mca_coll_gpu_log_call(name, self, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op,
                          "staged");
    rc = mca_coll_gpu_stage_pair_owned(m, self, name, inbuf, COLL_GPU_LAYOUT(dtype, count),
                                       COLL_GPU_READ, inoutbuf, COLL_GPU_LAYOUT(dtype, count),
                                       COLL_GPU_READWRITE, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_reduce_local.fn(mca_coll_gpu_view(&s), mca_coll_gpu_view(&r), count, dtype, op,
                                 m->prev_reduce_local.module);
    return mca_coll_gpu_unstage_pair(m, self, name, rc, &s, COLL_GPU_READ, &r,
                                     COLL_GPU_READWRITE);
}
