/*
 * coll_gpu_ucx.c - coll/gpu's own UCX (UCP) layer for the hierarchical collectives: see
 * coll_gpu_ucx.h.
 *
 * Why the endpoints outlive the communicators: an endpoint that has carried rendezvous-sized
 * messages over TCP (UCX 1.13 and 1.22 alike) leaves sockets open in CLOSE_WAIT after a flushing
 * ucp_ep_close_nbx has completed on both sides, however long the worker is progressed after it:
 * two descriptors per communicator made and freed, without bound.  A peer's endpoint is the
 * same whatever communicator uses it (messages are told apart by their tags, matched on the
 * worker), so one per peer process bounds what UCX holds by the number of peers.
 *
 * Every UCX status is checked where it is returned and turned into an OMPI error code with the
 * UCX reason logged at COLL_GPU_LOG_ERROR; the caller (coll_gpu_hier.c) makes every rank of the
 * call agree on the fallback.
 */
#include "ompi_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/runtime/mpiruntime.h"

#include "coll_gpu.h"
#include "coll_gpu_ucx.h"

uint64_t mca_coll_gpu_ucx_tag(uint32_t cid, uint64_t seq, int phase, uint64_t chunk)
{
    return ((uint64_t) (cid & 0xffffffu) << 40) | ((seq & 0xffffu) << 24)
           | ((uint64_t) (phase & 3) << 22) | (chunk & 0x3fffffu);
}

#ifdef COLL_GPU_HAVE_UCX

#include <ucp/api/ucp.h>

struct coll_gpu_ucx_comm_t {
    int size;
    ucp_ep_h *eps;        /* per rank of the communicator (the process' endpoint to that peer,
                           * not owned); NULL for this rank */
    char transports[160]; /* mca_coll_gpu_ucx_transports' answer */
};

/* The process' endpoint to one peer worker, known by the worker's address. */
typedef struct {
    void *addr;
    size_t len;
    ucp_ep_h ep;
    void *closing; /* the close's request (close_peers) */
} ucx_peer_t;

/* The process' UCP context and worker, made once (ucx_init), under ucx_lock. */
static opal_mutex_t ucx_lock = OPAL_MUTEX_STATIC_INIT;
static bool ucx_tried;
static int ucx_rc = OMPI_ERR_NOT_AVAILABLE;
static ucp_context_h ucx_context;
static ucp_worker_h ucx_worker;
static bool ucx_cuda;
static char ucx_desc[256] = "UCX (not initialised)";
/* Every endpoint this process made, one per peer worker, under ucx_lock; closed at finalize. */
static ucx_peer_t *ucx_peers;
static size_t ucx_npeers, ucx_peers_max;

bool mca_coll_gpu_ucx_built(void)
{
    return true;
}

static int ucx_error(const char *what, ucs_status_t st)
{
    COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:ucx: %s failed: %s", what,
                     ucs_status_string(st));
    return OMPI_ERROR;
}

/* Make the context and worker once.  The worker serves every thread that MPI lets in at once:
 * MPI_THREAD_MULTIPLE needs UCS_THREAD_MODE_MULTI; below it, calls are serialized. */
static int ucx_init(void)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES
                                         | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                           .features = UCP_FEATURE_TAG,
                           .mt_workers_shared = ompi_mpi_thread_multiple ? 1 : 0};
    ucp_worker_params_t wparams = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                   .thread_mode = ompi_mpi_thread_multiple
                                                      ? UCS_THREAD_MODE_MULTI
                                                      : UCS_THREAD_MODE_SERIALIZED};
    ucp_context_attr_t attr = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    ucp_config_t *config = NULL;
    const char *tls = getenv("UCX_TLS");
    ucs_status_t st;
    int rc = OMPI_SUCCESS;

    OPAL_THREAD_LOCK(&ucx_lock);
    if (ucx_tried) {
        rc = ucx_rc;
        OPAL_THREAD_UNLOCK(&ucx_lock);
        return rc;
    }
    ucx_tried = true;
    st = ucp_config_read(NULL, NULL, &config);
    if (UCS_OK != st) {
        rc = ucx_error("ucp_config_read", st);
        goto out;
    }
    st = ucp_init(&params, config, &ucx_context);
    ucp_config_release(config);
    if (UCS_OK != st) {
        ucx_context = NULL;
        rc = ucx_error("ucp_init", st);
        goto out;
    }
    st = ucp_context_query(ucx_context, &attr);
    if (UCS_OK != st) {
        rc = ucx_error("ucp_context_query", st);
        goto out;
    }
    ucx_cuda = 0 != (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA));
    st = ucp_worker_create(ucx_context, &wparams, &ucx_worker);
    if (UCS_OK != st) {
        ucx_worker = NULL;
        rc = ucx_error("ucp_worker_create", st);
        goto out;
    }
    snprintf(ucx_desc, sizeof(ucx_desc), "UCX %s, UCX_TLS=%s, CUDA memory %s",
             ucp_get_version_string(), (NULL != tls) ? tls : "(all)",
             ucx_cuda ? "supported by UCX" : "not supported by UCX");
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:ucx: context and worker ready: %s",
                     ucx_desc);
out:
    if (OMPI_SUCCESS != rc && NULL != ucx_context) {
        ucp_cleanup(ucx_context);
        ucx_context = NULL;
    }
    ucx_rc = rc;
    OPAL_THREAD_UNLOCK(&ucx_lock);
    return rc;
}

bool mca_coll_gpu_ucx_device_memory(void)
{
    return OMPI_SUCCESS == ucx_rc && ucx_cuda;
}

const char *mca_coll_gpu_ucx_describe(void)
{
    return ucx_desc;
}

void mca_coll_gpu_ucx_progress(void)
{
    (void) ucp_worker_progress(ucx_worker);
}

/* Add "tl:dev" to uc->transports unless it is there already (a comma-separated list). */
static void add_transport(coll_gpu_ucx_comm_t *uc, const char *tl, const char *dev)
{
    char item[64];
    size_t have = strlen(uc->transports);
    int n = snprintf(item, sizeof(item), "%s:%s", tl, dev);

    if (0 >= n || (size_t) n >= sizeof(item)) {
        return;
    }
    for (const char *p = uc->transports; NULL != (p = strstr(p, item)); p += n) {
        if ((p == uc->transports || ',' == p[-1]) && ('\0' == p[n] || ',' == p[n])) {
            return;
        }
    }
    if (have + (0 < have) + (size_t) n < sizeof(uc->transports)) {
        snprintf(uc->transports + have, sizeof(uc->transports) - have, "%s%s",
                 (0 < have) ? "," : "", item);
    }
}

#ifdef COLL_GPU_HAVE_UCP_EP_TRANSPORTS
/* UCX 1.14 and later name an endpoint's transports and devices (ucp_ep_query). */
static void ep_transports(coll_gpu_ucx_comm_t *uc, ucp_ep_h ep)
{
    ucp_transport_entry_t entries[16];
    ucp_ep_attr_t attr;

    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
    attr.transports.entries = entries;
    attr.transports.num_entries = sizeof(entries) / sizeof(entries[0]);
    attr.transports.entry_size = sizeof(entries[0]);
    if (UCS_OK != ucp_ep_query(ep, &attr)) {
        return;
    }
    for (unsigned i = 0; i < attr.transports.num_entries; ++i) {
        const char *tl = entries[i].transport_name, *dev = entries[i].device_name;

        if (NULL != tl && NULL != dev) {
            add_transport(uc, tl, dev);
        }
    }
}
#else
/* Older UCX names them only in ucp_ep_print_info's text: one line per lane,
 * "lane[0]:  0:tcp/lo.0 md[0] -> ...", the transport, its device and the path index. */
static void ep_transports(coll_gpu_ucx_comm_t *uc, ucp_ep_h ep)
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *f = open_memstream(&text, &text_len);

    if (NULL == f) {
        return;
    }
    ucp_ep_print_info(ep, f);
    if (0 != fclose(f) || NULL == text) {
        free(text);
        return;
    }
    for (const char *p = text; NULL != (p = strstr(p, "lane[")); ++p) {
        char tl[64], dev[64], *dot;
        int at = 0;

        (void) sscanf(p, "lane[%*[^]]]:%n", &at);
        if (0 == at) {
            break;
        }
        if (2 != sscanf(p + at, " %*d:%63[^/ \t\n]/%63[^ \t\n]", tl, dev)) {
            continue;
        }
        /* the device without the ".N" path index */
        dot = strrchr(dev, '.');
        if (NULL != dot && dot > dev && '\0' != dot[1]
            && strspn(dot + 1, "0123456789") == strlen(dot + 1)) {
            *dot = '\0';
        }
        add_transport(uc, tl, dev);
    }
    free(text);
}
#endif

const char *mca_coll_gpu_ucx_transports(coll_gpu_ucx_comm_t *uc)
{
    if (NULL == uc) {
        return "?";
    }
    uc->transports[0] = '\0';
    for (int i = 0; i < uc->size; ++i) {
        if (NULL != uc->eps[i]) {
            ep_transports(uc, uc->eps[i]);
        }
    }
    if ('\0' == uc->transports[0]) {
        snprintf(uc->transports, sizeof(uc->transports), "?");
    }
    return uc->transports;
}

/* An allreduce (MPI_MAX) of n ints over comm's own module (host buffers: the one below us). */
static int host_allreduce_max(struct ompi_communicator_t *comm, const int *in, int *out, int n)
{
    return comm->c_coll->coll_allreduce(in, out, n, MPI_INT, MPI_MAX, comm,
                                        comm->c_coll->coll_allreduce_module);
}

/* The process' endpoint to the worker at addr (len bytes): the one made before, else a new one
 * (counted in *made) kept until finalize.  Under ucx_lock.  A linear search: it runs once per
 * peer when a communicator first goes across nodes, among as many entries as peer leaders. */
static int peer_ep(const void *addr, size_t len, ucp_ep_h *ep, int *made)
{
    ucp_ep_params_t params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS};
    ucs_status_t st;
    void *copy;

    for (size_t i = 0; i < ucx_npeers; ++i) {
        if (ucx_peers[i].len == len && 0 == memcmp(ucx_peers[i].addr, addr, len)) {
            *ep = ucx_peers[i].ep;
            return OMPI_SUCCESS;
        }
    }
    if (ucx_npeers == ucx_peers_max) {
        size_t n = (0 == ucx_peers_max) ? 8 : 2 * ucx_peers_max;
        ucx_peer_t *grown = realloc(ucx_peers, n * sizeof(*grown));

        if (NULL == grown) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
        ucx_peers = grown;
        ucx_peers_max = n;
    }
    copy = malloc(len);
    if (NULL == copy) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    memcpy(copy, addr, len);
    params.address = (const ucp_address_t *) copy;
    st = ucp_ep_create(ucx_worker, &params, ep);
    if (UCS_OK != st) {
        free(copy);
        *ep = NULL;
        return ucx_error("ucp_ep_create", st);
    }
    ucx_peers[ucx_npeers++] = (ucx_peer_t) {.addr = copy, .len = len, .ep = *ep};
    ++*made;
    return OMPI_SUCCESS;
}

/*
 * Exchange worker addresses over comm and connect to every peer.  Every rank takes part in every
 * collective step whatever happened locally, so that no rank waits for one that gave up:
 *   1. allreduce (max) of (address length, -address length): every rank learns the longest
 *      address and whether some rank has none (a rank without UCX offers length 0); it needs no
 *      memory that could fail;
 *   2. each rank allocates its record (length, then address) and the table of all records, and
 *      an allreduce (max) of "could not" makes every rank give up together;
 *   3. allgather of the records, all of one size (the longest address).
 * The endpoints are made locally: their failure is this rank's alone, and the caller agrees on
 * the outcome with every rank of the call.
 */
int mca_coll_gpu_ucx_comm_create(struct ompi_communicator_t *comm, coll_gpu_ucx_comm_t **out)
{
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    ucp_address_t *addr = NULL;
    size_t addr_len = 0, rec, kept;
    int shape[2] = {0, 0}, all_shape[2] = {0, 0}; /* len, -len */
    int made = 0, nomem, any_nomem = 0, rc, local_rc;
    char *mine = NULL, *all = NULL;
    coll_gpu_ucx_comm_t *uc = NULL;
    ucs_status_t st;

    *out = NULL;
    local_rc = ucx_init();
    if (OMPI_SUCCESS == local_rc) {
        st = ucp_worker_get_address(ucx_worker, &addr, &addr_len);
        if (UCS_OK != st) {
            addr = NULL;
            local_rc = ucx_error("ucp_worker_get_address", st);
        } else if (addr_len > (size_t) INT32_MAX - sizeof(int32_t)) {
            local_rc = OMPI_ERR_BAD_PARAM;
        } else {
            shape[0] = (int) addr_len;
            shape[1] = -(int) addr_len;
        }
    }
    rc = host_allreduce_max(comm, shape, all_shape, 2);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    if (0 == all_shape[1]) { /* max(-len) is 0: some rank offers no address */
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:ucx (cid %d): some rank has no UCX "
                         "worker address%s", coll_gpu_comm_cid(comm),
                         (0 == shape[0]) ? " (this one)" : "");
        rc = OMPI_ERR_NOT_AVAILABLE;
        goto out;
    }
    rec = (sizeof(int32_t) + (size_t) all_shape[0] + 7) & ~(size_t) 7;
    if (!mca_coll_gpu_test_fail_alloc("ucx")) {
        mine = calloc(1, rec);
        all = calloc((size_t) size, rec);
    }
    nomem = (NULL == mine || NULL == all);
    if (nomem) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:ucx (cid %d): rank %d: no memory for "
                         "the %d peers' worker addresses (%zu B)", coll_gpu_comm_cid(comm), rank,
                         size, (size_t) size * rec);
    }
    rc = host_allreduce_max(comm, &nomem, &any_nomem, 1);
    if (OMPI_SUCCESS == rc && any_nomem) {
        rc = OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    *(int32_t *) mine = (int32_t) addr_len;
    memcpy(mine + sizeof(int32_t), addr, addr_len);
    rc = comm->c_coll->coll_allgather(mine, (int) rec, MPI_BYTE, all, (int) rec, MPI_BYTE, comm,
                                      comm->c_coll->coll_allgather_module);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    uc = calloc(1, sizeof(*uc));
    if (NULL == uc || NULL == (uc->eps = calloc((size_t) size, sizeof(ucp_ep_h)))) {
        rc = OMPI_ERR_OUT_OF_RESOURCE;
        goto out;
    }
    uc->size = size;
    OPAL_THREAD_LOCK(&ucx_lock);
    for (int i = 0; i < size && OMPI_SUCCESS == rc; ++i) {
        const char *r = all + (size_t) i * rec;

        if (i != rank) {
            rc = peer_ep(r + sizeof(int32_t), (size_t) *(const int32_t *) r, &uc->eps[i],
                         &made);
        }
    }
    kept = ucx_npeers;
    OPAL_THREAD_UNLOCK(&ucx_lock);
    if (OMPI_SUCCESS == rc && OMPI_SUCCESS == local_rc) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:ucx (cid %d): endpoints to %d peer(s): "
                         "%d made, %d reused (this process keeps %zu)", coll_gpu_comm_cid(comm),
                         size - 1, made, size - 1 - made, kept);
        *out = uc;
        uc = NULL;
    }
out:
    if (NULL != addr) {
        ucp_worker_release_address(ucx_worker, addr);
    }
    mca_coll_gpu_ucx_comm_destroy(uc);
    free(mine);
    free(all);
    return mca_coll_gpu_first_error(rc, local_rc);
}

/* Wait for a UCP request until end (now_s; teardown must not hang on a peer that is gone);
 * one still in flight then is left to UCX, released with the worker. */
static ucs_status_t wait_bounded(void *req, double end)
{
    ucs_status_t st;

    if (NULL == req || UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while (UCS_INPROGRESS == (st = ucp_request_check_status(req)) && mca_coll_gpu_now() < end) {
        (void) ucp_worker_progress(ucx_worker);
    }
    if (UCS_INPROGRESS == st) {
        return UCS_ERR_TIMED_OUT;
    }
    ucp_request_free(req);
    return st;
}

void mca_coll_gpu_ucx_comm_destroy(coll_gpu_ucx_comm_t *uc)
{
    if (NULL != uc) {
        free(uc->eps);
        free(uc);
    }
}

int mca_coll_gpu_ucx_start(coll_gpu_ucx_comm_t *uc, int peer, void *buf, size_t len,
                           uint64_t tag, bool device, coll_gpu_ucx_req_t *r)
{
    /* a receive is always a request, so that the length that arrived can be checked; device
     * memory is said, not detected: UCX skips its memory-type lookup */
    ucp_request_param_t p = {.op_attr_mask = (0 > peer) ? UCP_OP_ATTR_FLAG_NO_IMM_CMPL : 0};
    ucs_status_ptr_t sp;

    memset(r, 0, sizeof(*r));
    if (device) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        p.memory_type = UCS_MEMORY_TYPE_CUDA;
    }
    if (0 > peer) {
        sp = ucp_tag_recv_nbx(ucx_worker, buf, len, tag, UINT64_MAX, &p);
        r->expect = len;
    } else if (peer >= uc->size || NULL == uc->eps[peer]) {
        return r->status = OMPI_ERR_BAD_PARAM;
    } else {
        sp = ucp_tag_send_nbx(uc->eps[peer], buf, len, tag, &p);
    }
    if (UCS_PTR_IS_ERR(sp)) {
        return r->status = ucx_error((0 > peer) ? "ucp_tag_recv_nbx" : "ucp_tag_send_nbx",
                                     UCS_PTR_STATUS(sp));
    }
    r->req = sp; /* a send's NULL: sent already */
    return OMPI_SUCCESS;
}

int mca_coll_gpu_ucx_test(coll_gpu_ucx_req_t *r)
{
    ucp_tag_recv_info_t info;
    ucs_status_t st;

    if (NULL == r->req) {
        return r->status;
    }
    st = (0 < r->expect) ? ucp_tag_recv_request_test(r->req, &info)
                         : ucp_request_check_status(r->req);
    if (UCS_INPROGRESS == st) {
        return 1;
    }
    ucp_request_free(r->req);
    r->req = NULL;
    if (UCS_OK != st) {
        r->status = ucx_error(0 < r->expect ? "a tagged receive" : "a tagged send", st);
    } else if (0 < r->expect && info.length != r->expect) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR,
                         "coll:gpu:ucx: a message of %zu B where %zu B were expected",
                         (size_t) info.length, r->expect);
        r->status = MPI_ERR_TRUNCATE;
    }
    return r->status;
}

void mca_coll_gpu_ucx_abandon(coll_gpu_ucx_req_t *r)
{
    if (NULL == r->req) {
        return;
    }
    if (0 < r->expect) {
        ucp_request_cancel(ucx_worker, r->req);
    }
    (void) wait_bounded(r->req, mca_coll_gpu_now() + 10.0);
    r->req = NULL;
}

/* Close every endpoint at once (flushing: no call has anything in flight by now), then progress
 * the closes together, 10 s in all, so that a peer that has already exited cannot hold up
 * finalize; what is still closing then is released with the worker.  Under ucx_lock. */
static void close_peers(void)
{
    ucp_request_param_t p = {.op_attr_mask = 0};
    double end = mca_coll_gpu_now() + 10.0;

    for (size_t i = 0; i < ucx_npeers; ++i) {
        free(ucx_peers[i].addr);
        ucx_peers[i].closing = ucp_ep_close_nbx(ucx_peers[i].ep, &p);
    }
    for (size_t i = 0; i < ucx_npeers; ++i) {
        ucs_status_t st = wait_bounded(ucx_peers[i].closing, end);

        if (UCS_OK != st) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:ucx: closing an endpoint: %s",
                             ucs_status_string(st));
        }
    }
    free(ucx_peers);
    ucx_peers = NULL;
    ucx_npeers = ucx_peers_max = 0;
}

void mca_coll_gpu_ucx_finalize(void)
{
    OPAL_THREAD_LOCK(&ucx_lock);
    if (NULL != ucx_worker) {
        close_peers();
        ucp_worker_destroy(ucx_worker);
        ucx_worker = NULL;
    }
    if (NULL != ucx_context) {
        ucp_cleanup(ucx_context);
        ucx_context = NULL;
    }
    ucx_tried = false;
    ucx_rc = OMPI_ERR_NOT_AVAILABLE;
    OPAL_THREAD_UNLOCK(&ucx_lock);
}

#else /* !COLL_GPU_HAVE_UCX: mca_coll_gpu_ucx_built says so, and the rest is never reached */

bool mca_coll_gpu_ucx_built(void)
{
    return false;
}

int mca_coll_gpu_ucx_comm_create(struct ompi_communicator_t *comm, coll_gpu_ucx_comm_t **out)
{
    (void) comm;
    *out = NULL;
    return OMPI_ERR_NOT_AVAILABLE;
}

void mca_coll_gpu_ucx_comm_destroy(coll_gpu_ucx_comm_t *uc)
{
    (void) uc;
}

int mca_coll_gpu_ucx_start(coll_gpu_ucx_comm_t *uc, int peer, void *buf, size_t len,
                           uint64_t tag, bool device, coll_gpu_ucx_req_t *r)
{
    (void) uc, (void) peer, (void) buf, (void) len, (void) tag, (void) device;
    r->req = NULL;
    return r->status = OMPI_ERR_NOT_AVAILABLE;
}

int mca_coll_gpu_ucx_test(coll_gpu_ucx_req_t *r)
{
    return r->status;
}

void mca_coll_gpu_ucx_abandon(coll_gpu_ucx_req_t *r)
{
    (void) r;
}

void mca_coll_gpu_ucx_progress(void)
{
}

bool mca_coll_gpu_ucx_device_memory(void)
{
    return false;
}

const char *mca_coll_gpu_ucx_describe(void)
{
    return "UCX (not built)";
}

const char *mca_coll_gpu_ucx_transports(coll_gpu_ucx_comm_t *uc)
{
    (void) uc;
    return "?";
}

void mca_coll_gpu_ucx_finalize(void)
{
}

#endif /* COLL_GPU_HAVE_UCX */
