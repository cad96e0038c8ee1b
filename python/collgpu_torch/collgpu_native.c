/*
 * collgpu_native.c - the C side of the collgpu torch backend: MPI calls on raw buffers, loaded
 * by collgpu_torch/_native.py through ctypes.
 *
 * Why C and ctypes, not a C++ extension: a C++ extension of torch is bound to one torch minor
 * version's C++ ABI, and a backend that must be rebuilt for every torch release is a backend
 * users lose.  This library knows nothing of torch: it takes pointers, element counts and the
 * small codes below, and calls MPI, so one build serves every torch >= 2.4.  Device pointers go
 * to MPI as they are: coll/gpu, loaded in the same Open MPI, takes them.
 *
 * Every function returns an MPI error code (MPI_SUCCESS: 0); communicators and requests are
 * small integers indexing tables here, so that the Python side never holds an MPI handle (whose
 * C type differs between MPI implementations).
 *
 * MPI has no bfloat16 and Open MPI 4.1 no float16: their reductions use the datatypes and ops
 * of coll/gpu's own C library, libcollgpu (api/collgpu.h), which coll/gpu's component loads and
 * recognises (it reduces them in its GPU kernels, with float accumulators; staged calls reduce
 * on the host through the ops' functions, which round each addition as torch's CPU arithmetic
 * does).  Where libcollgpu cannot be found, 16-bit tensors still move (2-byte types of ours)
 * but are not reduced (cg_half_ops() says 0; the Python side refuses).  bool is MPI_C_BOOL,
 * reduced by the logical ops (sum and max: or; product and min: and).
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#    include <mpi-ext.h> /* MPIX_Query_cuda_support, where Open MPI has it */
#endif

#define CG_EXPORT __attribute__((visibility("default")))

/* element types, as collgpu_torch/_native.py numbers them */
enum {
    CG_F32 = 0, CG_F64, CG_F16, CG_BF16, CG_I8, CG_U8, CG_I16, CG_I32, CG_I64, CG_BOOL,
    CG_NTYPES
};
/* reduction ops (torch's average is a sum followed by a division, in Python) */
enum { CG_SUM = 0, CG_PROD, CG_MIN, CG_MAX, CG_BAND, CG_BOR, CG_BXOR, CG_NOPS };

#define CG_MAX_COMMS 4096
#define CG_MAX_REQS 65536

static MPI_Comm comms[CG_MAX_COMMS];
static MPI_Request reqs[CG_MAX_REQS];
static unsigned char taken[CG_MAX_REQS]; /* a slot handed out and not yet waited for */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Datatype t_f16 = MPI_DATATYPE_NULL, t_bf16 = MPI_DATATYPE_NULL;
/* libcollgpu's ops, by CG_SUM .. CG_MAX: float16's, bfloat16's (one op per format: the op
 * names the format); half_ops: they are there */
static MPI_Op op16[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
static MPI_Op op16bf[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
static int half_ops;
static int we_initialized;

/* ---- 16-bit floats: libcollgpu's handles ---------------------------------------------------- */

/* libcollgpu as coll/gpu's component loaded it (a bare soname matches a loaded object), else
 * from the library path; its handles into t_f16, t_bf16 and op16.  0 when it is not there. */
static int load_libcollgpu(void)
{
    typedef int (*type_fn)(MPI_Datatype *);
    typedef int (*op_fn)(MPI_Op, MPI_Datatype, MPI_Op *);
    void *h = dlopen("libcollgpu.so.0", RTLD_NOW | RTLD_NOLOAD);
    type_fn f16, bf16;
    op_fn op;

    if (NULL == h) {
        h = dlopen("libcollgpu.so.0", RTLD_NOW);
    }
    if (NULL == h) {
        return 0;
    }
    f16 = (type_fn) dlsym(h, "collgpu_type_float16");
    bf16 = (type_fn) dlsym(h, "collgpu_type_bfloat16");
    op = (op_fn) dlsym(h, "collgpu_op");
    if (NULL == f16 || NULL == bf16 || NULL == op || MPI_SUCCESS != f16(&t_f16)
        || MPI_SUCCESS != bf16(&t_bf16)) {
        return 0;
    }
    MPI_Op base[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX}; /* by CG_SUM .. CG_MAX */
    for (int i = 0; i < 4; ++i) {
        if (MPI_SUCCESS != op(base[i], t_f16, &op16[i])
            || MPI_SUCCESS != op(base[i], t_bf16, &op16bf[i])) {
            return 0;
        }
    }
    return 1;
}

CG_EXPORT int cg_cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#else
    return 0;
#endif
}

CG_EXPORT int cg_half_ops(void)
{
    return half_ops;
}

/* ---- codes to MPI handles ----------------------------------------------------------------- */

static MPI_Datatype type_of(int dt)
{
    switch (dt) {
    case CG_F32: return MPI_FLOAT;
    case CG_F64: return MPI_DOUBLE;
    case CG_F16: return t_f16;
    case CG_BF16: return t_bf16;
    case CG_I8: return MPI_INT8_T;
    case CG_U8: return MPI_UINT8_T;
    case CG_I16: return MPI_INT16_T;
    case CG_I32: return MPI_INT32_T;
    case CG_I64: return MPI_INT64_T;
    case CG_BOOL: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;
    }
}

/* The MPI op of a code for an element type; MPI_OP_NULL where it has none (the Python side
 * refuses those before calling: bitwise ops on floats). */
static MPI_Op op_of(int op, int dt)
{
    if (op < 0 || op >= CG_NOPS) {
        return MPI_OP_NULL;
    }
    if (CG_F16 == dt || CG_BF16 == dt) {
        return op > CG_MAX || !half_ops ? MPI_OP_NULL : CG_BF16 == dt ? op16bf[op] : op16[op];
    }
    if (CG_BOOL == dt) {
        switch (op) {
        case CG_SUM: case CG_MAX: case CG_BOR: return MPI_LOR;
        case CG_PROD: case CG_MIN: case CG_BAND: return MPI_LAND;
        default: return MPI_LXOR;
        }
    }
    if ((CG_F32 == dt || CG_F64 == dt) && op > CG_MAX) {
        return MPI_OP_NULL;
    }
    switch (op) {
    case CG_SUM: return MPI_SUM;
    case CG_PROD: return MPI_PROD;
    case CG_MIN: return MPI_MIN;
    case CG_MAX: return MPI_MAX;
    case CG_BAND: return MPI_BAND;
    case CG_BOR: return MPI_BOR;
    default: return MPI_BXOR;
    }
}

static MPI_Comm comm_of(int c)
{
    return (0 <= c && c < CG_MAX_COMMS) ? comms[c] : MPI_COMM_NULL;
}

/* A slot for a new request; -1 when the table is full. */
static int req_slot(void)
{
    static int next;
    int found = -1;

    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < CG_MAX_REQS && -1 == found; ++i) {
        int k = (next + i) % CG_MAX_REQS;
        if (!taken[k]) {
            found = k;
            next = k + 1;
            taken[k] = 1;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

/* Counts beyond an int (2^31 elements) are refused: MPI's C interface takes an int. */
#define CG_COUNT(n) ((n) < 0 || (n) > INT_MAX ? -1 : (int) (n))

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* MPI initialised if nobody did (MPI_THREAD_MULTIPLE asked: torch calls collectives from the
 * autograd engine's threads), the 16-bit types and ops made, the world communicator at 0. */
CG_EXPORT int cg_init(int *rank, int *size, int *thread_level)
{
    int flag = 0, rc = MPI_SUCCESS;

    MPI_Initialized(&flag);
    if (!flag) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, thread_level);
        if (MPI_SUCCESS != rc) {
            return rc;
        }
        we_initialized = 1;
    } else {
        MPI_Query_thread(thread_level);
    }
    for (int i = 0; i < CG_MAX_COMMS; ++i) {
        comms[i] = MPI_COMM_NULL;
    }
    for (int i = 0; i < CG_MAX_REQS; ++i) {
        reqs[i] = MPI_REQUEST_NULL;
    }
    comms[0] = MPI_COMM_WORLD;
    if (MPI_DATATYPE_NULL == t_f16) {
        half_ops = load_libcollgpu();
        if (!half_ops) {
            MPI_Type_contiguous(2, MPI_BYTE, &t_f16);
            MPI_Type_commit(&t_f16);
            MPI_Type_contiguous(2, MPI_BYTE, &t_bf16);
            MPI_Type_commit(&t_bf16);
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return MPI_SUCCESS;
}

/* MPI_Finalize when this library initialised MPI (at the interpreter's exit). */
CG_EXPORT int cg_finalize(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!we_initialized || finalized) {
        return MPI_SUCCESS;
    }
    for (int i = 1; i < CG_MAX_COMMS; ++i) {
        if (MPI_COMM_NULL != comms[i]) {
            MPI_Comm_free(&comms[i]);
        }
    }
    return MPI_Finalize();
}

CG_EXPORT void cg_error_string(int code, char *buf, int len)
{
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_SUCCESS != MPI_Error_string(code, msg, &n)) {
        snprintf(msg, sizeof(msg), "MPI error %d", code);
    }
    snprintf(buf, (size_t) len, "%s", msg);
}

/* A communicator of the world ranks given (in that order), made by those ranks alone
 * (MPI_Comm_create_group: torch creates a group's backend on its members only). */
CG_EXPORT int cg_comm_create(int n, const int *world_ranks, int *id)
{
    MPI_Group world, group;
    MPI_Comm comm = MPI_COMM_NULL;
    int rc, slot = -1;

    pthread_mutex_lock(&table_lock);
    for (int i = 1; i < CG_MAX_COMMS && -1 == slot; ++i) {
        if (MPI_COMM_NULL == comms[i]) {
            slot = i;
            comms[i] = MPI_COMM_SELF; /* taken */
        }
    }
    pthread_mutex_unlock(&table_lock);
    if (-1 == slot) {
        return MPI_ERR_NO_MEM;
    }
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    rc = MPI_Group_incl(world, n, world_ranks, &group);
    if (MPI_SUCCESS == rc) {
        rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, 0x5c6, &comm);
        MPI_Group_free(&group);
    }
    MPI_Group_free(&world);
    if (MPI_SUCCESS == rc) {
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    }
    comms[slot] = (MPI_SUCCESS == rc) ? comm : MPI_COMM_NULL;
    *id = slot;
    return rc;
}

CG_EXPORT int cg_comm_free(int id)
{
    MPI_Comm c = comm_of(id);
    if (id <= 0 || MPI_COMM_NULL == c) {
        return MPI_SUCCESS;
    }
    comms[id] = MPI_COMM_NULL;
    return MPI_Comm_free(&c);
}

/* ---- collectives: blocking when req is NULL, else the MPI_I... form into *req ------------ */

#define CG_START(blocking, nonblocking)                                                         \
    do {                                                                                        \
        int slot_;                                                                              \
        if (NULL == req) {                                                                      \
            return (blocking);                                                                  \
        }                                                                                       \
        slot_ = req_slot();                                                                     \
        if (slot_ < 0) {                                                                        \
            return MPI_ERR_NO_MEM;                                                              \
        }                                                                                       \
        {                                                                                       \
            MPI_Request *request = &reqs[slot_];                                                \
            int rc_ = (nonblocking);                                                            \
            if (MPI_SUCCESS != rc_) {                                                           \
                reqs[slot_] = MPI_REQUEST_NULL;                                                 \
                taken[slot_] = 0;                                                               \
                return rc_;                                                                     \
            }                                                                                   \
        }                                                                                       \
        *req = slot_;                                                                           \
        return MPI_SUCCESS;                                                                     \
    } while (0)

/* The checks every call makes: a communicator and a type of ours, an op where the call reduces
 * (need_op), a count that fits an int; MPI_SUCCESS with *n set, else the error to return. */
static int cg_args(MPI_Comm c, MPI_Datatype t, int need_op, MPI_Op o, int64_t count, int *n)
{
    if (MPI_COMM_NULL == c || MPI_DATATYPE_NULL == t || (need_op && MPI_OP_NULL == o)) {
        return MPI_ERR_ARG;
    }
    *n = CG_COUNT(count);
    return (*n < 0) ? MPI_ERR_COUNT : MPI_SUCCESS;
}

CG_EXPORT int cg_allreduce(int comm, const void *sbuf, void *rbuf, int64_t count, int dt, int op,
                           int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    MPI_Op o = op_of(op, dt);
    int n = 0, rc = cg_args(c, t, 1, o, count, &n);
    const void *s = (NULL == sbuf) ? MPI_IN_PLACE : sbuf;

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Allreduce(s, rbuf, n, t, o, c), MPI_Iallreduce(s, rbuf, n, t, o, c, request));
}

/* The driver's cuStreamSynchronize (a CUstream is the runtime's cudaStream_t), from the
 * libcuda.so.1 that torch loaded; NULL where there is none.  Looked up once. */
typedef int (*cu_sync_fn)(void *stream);
static cu_sync_fn cu_stream_sync(void)
{
    static cu_sync_fn fn;
    static int looked;

    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        fn = (NULL == h) ? NULL : (cu_sync_fn) dlsym(h, "cuStreamSynchronize");
        __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
    }
    return fn;
}

/* A blocking allreduce in place on a CUDA tensor, ordered after the work queued on its stream:
 * the stream synchronised through the driver, then MPI_Allreduce, in one call from Python
 * where the two cost two ctypes calls (torch 4-byte allreduce's critical path).  CG_UNSYNCED,
 * before anything else, when the driver is not there or refuses the stream: the caller then
 * synchronises through torch, which raises torch's error if there is one. */
#define CG_UNSYNCED (-1)
CG_EXPORT int cg_allreduce_synced(void *stream, int comm, void *buf, int64_t count, int dt,
                                  int op)
{
    cu_sync_fn sync = cu_stream_sync();

    if (NULL == sync || 0 != sync(stream)) {
        return CG_UNSYNCED;
    }
    return cg_allreduce(comm, NULL, buf, count, dt, op, NULL);
}

CG_EXPORT int cg_reduce(int comm, const void *sbuf, void *rbuf, int64_t count, int dt, int op,
                        int root, int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    MPI_Op o = op_of(op, dt);
    int n = 0, rc = cg_args(c, t, 1, o, count, &n);
    const void *s = (NULL == sbuf) ? MPI_IN_PLACE : sbuf;

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Reduce(s, rbuf, n, t, o, root, c),
             MPI_Ireduce(s, rbuf, n, t, o, root, c, request));
}

CG_EXPORT int cg_bcast(int comm, void *buf, int64_t count, int dt, int root, int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    int n = 0, rc = cg_args(c, t, 0, MPI_OP_NULL, count, &n);

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Bcast(buf, n, t, root, c), MPI_Ibcast(buf, n, t, root, c, request));
}

/* count: elements each rank contributes */
CG_EXPORT int cg_allgather(int comm, const void *sbuf, void *rbuf, int64_t count, int dt,
                           int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    int n = 0, rc = cg_args(c, t, 0, MPI_OP_NULL, count, &n);

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Allgather(sbuf, n, t, rbuf, n, t, c),
             MPI_Iallgather(sbuf, n, t, rbuf, n, t, c, request));
}

/* count: elements each rank receives */
CG_EXPORT int cg_reduce_scatter(int comm, const void *sbuf, void *rbuf, int64_t count, int dt,
                                int op, int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    MPI_Op o = op_of(op, dt);
    int n = 0, rc = cg_args(c, t, 1, o, count, &n);

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Reduce_scatter_block(sbuf, rbuf, n, t, o, c),
             MPI_Ireduce_scatter_block(sbuf, rbuf, n, t, o, c, request));
}

/* count: elements per rank's block; rbuf is significant at the root only */
CG_EXPORT int cg_gather(int comm, const void *sbuf, void *rbuf, int64_t count, int dt, int root,
                        int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    int n = 0, rc = cg_args(c, t, 0, MPI_OP_NULL, count, &n);

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Gather(sbuf, n, t, rbuf, n, t, root, c),
             MPI_Igather(sbuf, n, t, rbuf, n, t, root, c, request));
}

/* count: elements per rank's block; sbuf is significant at the root only */
CG_EXPORT int cg_scatter(int comm, const void *sbuf, void *rbuf, int64_t count, int dt, int root,
                         int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    int n = 0, rc = cg_args(c, t, 0, MPI_OP_NULL, count, &n);

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Scatter(sbuf, n, t, rbuf, n, t, root, c),
             MPI_Iscatter(sbuf, n, t, rbuf, n, t, root, c, request));
}

/* counts and displacements in elements, one per rank of the communicator */
CG_EXPORT int cg_alltoallv(int comm, const void *sbuf, const int *scounts, const int *sdispls,
                           void *rbuf, const int *rcounts, const int *rdispls, int dt, int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);

    if (MPI_COMM_NULL == c || MPI_DATATYPE_NULL == t) {
        return MPI_ERR_ARG;
    }
    CG_START(MPI_Alltoallv(sbuf, scounts, sdispls, t, rbuf, rcounts, rdispls, t, c),
             MPI_Ialltoallv(sbuf, scounts, sdispls, t, rbuf, rcounts, rdispls, t, c, request));
}

CG_EXPORT int cg_barrier(int comm, int *req)
{
    MPI_Comm c = comm_of(comm);

    if (MPI_COMM_NULL == c) {
        return MPI_ERR_COMM;
    }
    CG_START(MPI_Barrier(c), MPI_Ibarrier(c, request));
}

/* ---- point to point ----------------------------------------------------------------------- */

CG_EXPORT int cg_send(int comm, const void *buf, int64_t count, int dt, int dst, int tag,
                      int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    int n = 0, rc = cg_args(c, t, 0, MPI_OP_NULL, count, &n);

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Send(buf, n, t, dst, tag, c), MPI_Isend(buf, n, t, dst, tag, c, request));
}

/* src < 0: any source (the sender's rank comes back through cg_wait) */
CG_EXPORT int cg_recv(int comm, void *buf, int64_t count, int dt, int src, int tag, int *req)
{
    MPI_Comm c = comm_of(comm);
    MPI_Datatype t = type_of(dt);
    int n = 0, rc = cg_args(c, t, 0, MPI_OP_NULL, count, &n), from = (src < 0) ? MPI_ANY_SOURCE : src;

    if (MPI_SUCCESS != rc) {
        return rc;
    }
    CG_START(MPI_Recv(buf, n, t, from, tag, c, MPI_STATUS_IGNORE),
             MPI_Irecv(buf, n, t, from, tag, c, request));
}

/* ---- requests ------------------------------------------------------------------------------ */

/* Wait for request id (a slot of cg_*'s req); *source: the sender of a receive, else -1. */
CG_EXPORT int cg_wait(int id, int *source)
{
    MPI_Status st;
    int rc;

    if (id < 0 || id >= CG_MAX_REQS) {
        return MPI_ERR_REQUEST;
    }
    rc = MPI_Wait(&reqs[id], &st);
    *source = (MPI_SUCCESS == rc) ? st.MPI_SOURCE : -1;
    reqs[id] = MPI_REQUEST_NULL;
    taken[id] = 0;
    return rc;
}

/* *done: 1 once request id has ended (then the slot is free again, as after cg_wait). */
CG_EXPORT int cg_test(int id, int *done)
{
    int rc;

    if (id < 0 || id >= CG_MAX_REQS) {
        return MPI_ERR_REQUEST;
    }
    rc = MPI_Test(&reqs[id], done, MPI_STATUS_IGNORE);
    if (MPI_SUCCESS != rc) {
        *done = 1;
        reqs[id] = MPI_REQUEST_NULL;
    }
    if (*done) {
        taken[id] = 0;
    }
    return rc;
}
