/*
 * coll_gpu_component.c - the component instance of coll/gpu: open/close and the registration of
 * every MCA parameter (ompi_info --param coll gpu --level 9 lists them with this help text).
 */
#include "ompi_config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/util/show_help.h"
#include "ompi/request/request.h"

#include "coll_gpu.h"
#include "coll_gpu_ucx.h"

static int gpu_register(void);
static int gpu_open(void);
static int gpu_close(void);

/* The one symbol the DSO exports: the loader finds it by name (mca_coll_gpu_component). */
__attribute__((visibility("default"))) mca_coll_gpu_component_t mca_coll_gpu_component = {
    .super = {
        .collm_version = {
            COLL_GPU_COMPONENT_VERSION,
            .mca_component_name = "gpu",
            MCA_BASE_MAKE_VERSION(component, OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
                                  OMPI_RELEASE_VERSION),
            .mca_open_component = gpu_open,
            .mca_close_component = gpu_close,
            .mca_register_component_params = gpu_register,
        },
        .collm_data = {
            /* the component can be checkpointed: it keeps no state across restarts */
            MCA_BASE_METADATA_PARAM_CHECKPOINT
        },
        .collm_init_query = mca_coll_gpu_init_query,
        .collm_comm_query = mca_coll_gpu_comm_query,
    },
    .output = -1,
};

static const mca_base_var_enum_value_t device_values[] = {
    {COLL_GPU_DEVICE_AUTO, "auto"},
    {COLL_GPU_DEVICE_CUDA, "cuda"},
    {COLL_GPU_DEVICE_EMULATED, "emulated"},
    {0, NULL},
};
static const mca_base_var_enum_value_t exchange_values[] = {
    {0, "auto"},
    {1, "staged"},
    {0, NULL},
};

/* topo's {value, name} tables are laid out as Open MPI's enum values (checked below) */
_Static_assert(sizeof(topo_enum_value_t) == sizeof(mca_base_var_enum_value_t),
               "topo_enum_value_t must match mca_base_var_enum_value_t");
#define AS_MCA_ENUM(values) ((const mca_base_var_enum_value_t *) (values))

/*
 * Every parameter, registered in this order by gpu_register.  The ranges of the numeric ones
 * (ranged): Open MPI's parser takes "abc" and "1e30" for 0 and 1, "12x" for 12 and "-1" for
 * SIZE_MAX, silently, and coll/gpu would act on that: 64g of oneshot_slot_bytes wrote
 * 2 x 64 GiB per rank into /dev/shm on the emulated device.  So each value is checked once at
 * open: a string that is not a number (read back from the environment, where mpirun puts
 * --mca values; a value from a parameter file is only range checked) or a negative size takes
 * the default; a number out of range takes the nearest bound.  Either way one line names the
 * parameter, from world rank 0 only (every rank applies the same rule to the same values, so
 * ALL_EQ parameters stay equal).  The caps that depend on the machine (its memory) are only on
 * parameters that ranks of different nodes never need to share: the team's slot and the
 * staging cache.
 *
 * Scopes: every parameter that changes the path of a call (the algorithms, the kernel launch
 * shape, the chunk, the one-shot slot, peer access, uniform_buffers) has the scope
 * MCA_BASE_VAR_SCOPE_ALL_EQ: every rank of a call must choose the same path, so these must hold
 * the same value on every process, also when an MPI_T tool sets those settable at run time.
 */
typedef struct {
    const char *name;                        /* after coll_gpu_ */
    mca_base_var_type_t type;
    void *storage;                           /* in mca_coll_gpu_component */
    mca_base_var_info_lvl_t level;
    mca_base_var_scope_t scope;
    const mca_base_var_enum_value_t *values; /* an enum's names (type INT), else NULL */
    int flags;                               /* MCA_BASE_VAR_FLAG_SETTABLE: MPI_T may set it */
    int64_t def;                             /* the default (enums: 0, auto; strings: NULL) */
    bool ranged;                             /* a number whose range gpu_check_ranges checks */
    int64_t lo, hi;     /* the range; hi < 0: set at open (gpu_machine_cap) */
    bool zero_off;      /* 0 is allowed below lo (auto, or off) */
    const char *why_hi; /* what the upper bound protects */
    const char *help;
} gpu_param_t;

#define GPU_KiB ((int64_t) 1 << 10)
#define GPU_MiB ((int64_t) 1 << 20)
#define GPU_GiB ((int64_t) 1 << 30)
#define GPU_C (&mca_coll_gpu_component)
/* coll_gpu_<name>, kept in mca_coll_gpu_component.<name>: MCA_BASE_VAR_TYPE_<type>,
 * OPAL_INFO_LVL_<level>, MCA_BASE_VAR_SCOPE_<scope> */
#define GPU_PARAM(name_, type_, level_, scope_)                                               \
    .name = #name_, .type = MCA_BASE_VAR_TYPE_##type_, .storage = &GPU_C->name_,              \
    .level = OPAL_INFO_LVL_##level_, .scope = MCA_BASE_VAR_SCOPE_##scope_
#define GPU_RANGE(lo_, hi_, zero_off_, why_hi_)                                              \
    .ranged = true, .lo = (lo_), .hi = (hi_), .zero_off = (zero_off_), .why_hi = (why_hi_)
#define GPU_ANY_INT GPU_RANGE(INT_MIN, INT_MAX, false, "")
#define GPU_SECONDS GPU_RANGE(0, INT_MAX, false, "")
#define GPU_RANK GPU_RANGE(-1, INT_MAX, false, "")

static gpu_param_t gpu_params[] = {
    {GPU_PARAM(priority, INT, 6, READONLY), GPU_ANY_INT,
     /* above coll/self (75) and coll/cuda (78): coll/gpu delegates host buffers to them */
     .def = 80,
     .help = "Priority of coll/gpu (it takes every data-carrying collective and hands host "
             "buffers to the component below it).  A value not above another selected "
             "component's (other than cuda, accelerator, hcoll, ucc) is raised just above it, "
             "with a warning: that component would take collectives it cannot run on device "
             "buffers.  Negative: off"},
    {GPU_PARAM(verbose, INT, 2, READONLY), GPU_ANY_INT,
     .help = "Verbosity of coll/gpu: 1 errors and fallbacks, 5 communicator selection and "
             "disqualification, 10 one line per device-buffer call with the path taken"},
    {.name = "device", .type = MCA_BASE_VAR_TYPE_INT, .storage = &GPU_C->device_choice,
     .level = OPAL_INFO_LVL_3, .scope = MCA_BASE_VAR_SCOPE_ALL, .values = device_values,
     .help = "Device backend: auto (CUDA when a driver and a GPU are present, otherwise host "
             "buffers only, silently: coll/gpu still fills the slots the component list leaves "
             "empty), cuda (CUDA, and report when it cannot be used), emulated (the CPU "
             "pretends to be a GPU; for testing only, never chosen automatically)"},
    {GPU_PARAM(stage_cache_bytes, SIZE_T, 5, READONLY), .def = 64 * GPU_MiB,
     GPU_RANGE(0, -16, false, "1/16 of this machine's memory"),
     .help = "Pinned host bounce memory kept per communicator between staged calls (bytes); "
             "larger staged calls allocate and free their own"},
    {GPU_PARAM(pinned_pool_bytes, SIZE_T, 5, READONLY),
     /* the nonblocking and persistent calls' bounce memory: enough for a few dozen calls of
      * up to a MiB in flight at once, a fraction of what each communicator's cache may hold */
     .def = 16 * GPU_MiB,
     GPU_RANGE(0, -16, false, "1/16 of this machine's memory"),
     .help = "Pinned host memory the process keeps between staged calls for the bounce buffers "
             "of nonblocking and persistent collectives and of blocking ones larger than "
             "coll_gpu_stage_cache_bytes (bytes, up to 1/16 of the machine's memory): blocks of "
             "powers of two from 4 KiB, the least recently used freed beyond this bound, and "
             "those unused for 10 s at a communicator's free; larger calls allocate and free "
             "their own (pinning takes milliseconds).  0: no block is kept (one given back "
             "inside progress is freed at the next call's start, which may take it if it fits)"},
    {GPU_PARAM(allreduce_algorithm, INT, 5, ALL_EQ),
     .values = AS_MCA_ENUM(topo_allreduce_alg_values), .flags = MCA_BASE_VAR_FLAG_SETTABLE,
     .help = "Allreduce algorithm for device buffers (NCCL_ALGO): auto (the decision table), "
             "staged (pinned host buffers and the component below coll/gpu), oneshot (every "
             "rank reduces all peers' data; small messages), twoshot (reduce-scatter then "
             "all-gather by peer loads/stores, zero-copy), ring (pipelined between ring "
             "neighbours only), fused (one kernel exchanges through the scratch with flags over "
             "NVLink and reduces; small messages), twoshot_ce (two-shot whose transfers are "
             "copy-engine pulls pipelined with the local reduce; large messages).  Settable at "
             "run time through MPI_T"},
    {GPU_PARAM(bcast_algorithm, INT, 5, ALL_EQ),
     .values = AS_MCA_ENUM(topo_bcast_alg_values), .flags = MCA_BASE_VAR_FLAG_SETTABLE,
     .help = "Broadcast algorithm for device buffers: auto (the decision table), staged, push "
             "(the root copies into every peer's buffer), chain and tree (pipelined along the "
             "node model's ring, or down a binary tree over it), pull (every rank copies the "
             "root's buffer with its copy engine).  Settable at run time through MPI_T"},
    {GPU_PARAM(exchange_algorithm, INT, 5, ALL_EQ),
     .values = exchange_values, .flags = MCA_BASE_VAR_FLAG_SETTABLE,
     .help = "Blocking allgather, allgatherv, alltoall and alltoallv on device buffers: auto "
             "(one exchange on the node team where every rank passes device memory), staged "
             "(pinned host buffers and the component below coll/gpu).  Settable at run time "
             "through MPI_T"},
    {GPU_PARAM(nblocks, INT, 6, ALL_EQ),
     GPU_RANGE(0, 1024, false, "more blocks than any GPU runs at once"),
     .help = "Thread blocks of the reduction kernels (NCCL_MIN_NCHANNELS, 0-1024); 0: chosen "
             "by the decision table"},
    {GPU_PARAM(nthreads, INT, 6, ALL_EQ), GPU_RANGE(0, 1024, false, "CUDA's threads per block"),
     .help = "Threads per block of the reduction kernels (NCCL_NTHREADS, 0-1024); 0: chosen "
             "by the decision table"},
    {GPU_PARAM(chunk_bytes, SIZE_T, 6, ALL_EQ),
     GPU_RANGE(4 * GPU_KiB, GPU_GiB, true, "1 GiB, beyond which nothing is pipelined"),
     .help = "Pipeline chunk of pipelined algorithms (bytes, 4 KiB-1 GiB); 0: chosen by the "
             "decision table"},
    {GPU_PARAM(oneshot_slot_bytes, SIZE_T, 6, ALL_EQ), .def = GPU_MiB,
     GPU_RANGE(64 * GPU_KiB, -64, false,
               "1/64 of this machine's memory (2 slots per rank), at most 1 GiB"),
     .help = "Device scratch per rank for one-shot and fused allreduce (two slots of this "
             "size, 8 KiB of each for the fused allreduce's flags); larger messages use "
             "two-shot, or fused pieces of a slot's share per rank (64 KiB up to 1/64 of the "
             "machine's memory, at most 1 GiB)"},
    {GPU_PARAM(uniform_buffers, BOOL, 3, ALL_EQ),
     .help = "A promise, not needed for correct results: every rank passes the same kind of "
             "memory (host or device) to each allreduce, bcast and reduce, as NCCL requires, "
             "so that the per-call agreement on the kinds is skipped.  Without it (the default) "
             "the ranks of each call agree through a block they share on their host (a host "
             "allreduce where they span hosts); a program that breaks the promise may hang"},
    {GPU_PARAM(p2p_level, INT, 5, ALL_EQ), .values = AS_MCA_ENUM(topo_p2p_level_values),
     .help = "Worst path over which GPUs use peer access (NCCL_P2P_LEVEL): auto (PXB), NVL, "
             "PIX, PXB, PHB, SYS"},
    {GPU_PARAM(p2p_disable, BOOL, 5, ALL_EQ),
     .help = "Never use peer access between different GPUs (NCCL_P2P_DISABLE)"},
    {GPU_PARAM(topo_file, STRING, 5, READONLY),
     .help = "Load the node model from this file instead of probing (NCCL_TOPO_FILE; format: "
             "topo/FORMAT.md)"},
    {GPU_PARAM(topo_dump_file, STRING, 5, READONLY),
     .help = "Write the probed (or loaded) node model to this file (NCCL_TOPO_DUMP_FILE)"},
    /* all ranks must give up alike: ALL_EQ */
    {GPU_PARAM(hang_warn_seconds, INT, 3, ALL_EQ), GPU_SECONDS, .def = 60,
     .help = "A rank that has waited this long (seconds) for its peers in one of coll/gpu's "
             "own waits (the node team's flags on the fast path, the team's setup exchange, the "
             "per-call agreement on memory kinds) prints one line naming the collective, the "
             "communicator, the call's number through the team and the ranks it waits for, and "
             "keeps waiting (a slow peer is not an error); 0: never.  Waits inside the host "
             "collectives below coll/gpu (staged calls, tuned) are not covered"},
    {GPU_PARAM(hang_error_seconds, INT, 4, ALL_EQ), GPU_SECONDS,
     .help = "A rank that has waited this long (seconds) on the node team's flags in a "
             "fast-path call gives up: the call returns an MPI error on it, on every rank that "
             "waits for it, and on the ranks that arrive later, and every later fast-path call "
             "on that communicator fails too (a rank that is calls behind cannot safely join "
             "again); 0 (default): never give up.  Only the team's flags: a host exchange "
             "already started (team setup, agreement) cannot be withdrawn, and waits inside the "
             "host collectives below coll/gpu are not covered"},
    {GPU_PARAM(test_fail_team, INT, 9, ALL_EQ), GPU_RANK, .def = -1,
     .help = "Testing only: on this rank of every communicator, the node team's device scratch "
             "allocation fails (as if out of device memory), so that the failed setup can be "
             "tested; -1: off"},
    {GPU_PARAM(test_fail_alloc, INT, 9, ALL_EQ), GPU_RANK, .def = -1,
     .help = "Testing only: on this rank of MPI_COMM_WORLD, the host allocations of "
             "coll_gpu_test_fail_alloc_site fail (as if out of memory), so that the rank's part "
             "in the collective after a local failure can be tested; -1: off"},
    {GPU_PARAM(test_fail_alloc_site, STRING, 9, ALL_EQ),
     .help = "Testing only: which allocations coll_gpu_test_fail_alloc fails: stage (the "
             "bounce memory of staged calls, pinned and plain), team (the node team's setup "
             "state), fallback (rank 0's gather buffer in the linear host fallback of "
             "nonblocking calls queued on a failed team), hier_state and hier (the state and the "
             "tables of the hierarchical path's setup), hier_scratch (both the device scratch "
             "and the host memory of a reduce-scatter across nodes), ucx (the worker address "
             "tables of the UCX setup), kinds_board (rank 0's shared block of the kinds "
             "agreement: the communicator then agrees by host collectives, as across hosts)"},
    /* across nodes: coll_gpu_hier.c and coll_gpu_ucx.c */
    {GPU_PARAM(emulate_nodes, INT, 5, ALL_EQ), GPU_RANGE(0, 1024, false, "1024 emulated nodes"),
     .help = "Split the ranks of one host into this many nodes (blocks of MPI_COMM_WORLD ranks: "
             "rank r is on node r * N / size), so that the paths across nodes (node teams per "
             "node, UCX between node leaders) run on one machine (at most 1024); 0 or 1: off"},
    {GPU_PARAM(ucx_chunk_bytes, SIZE_T, 5, ALL_EQ), .def = GPU_MiB,
     GPU_RANGE(4 * GPU_KiB, 256 * GPU_MiB, false,
               "256 MiB of pinned host memory per chunk in flight"),
     .help = "Chunk of the pipeline between node leaders over UCX (bytes, 4 KiB-256 MiB, "
             "rounded down to a multiple of 16)"},
    {GPU_PARAM(ucx_depth, INT, 5, ALL_EQ), .def = 4,
     GPU_RANGE(1, 16, false, "16 chunks in flight"),
     .help = "Chunks in flight per node leader in the pipeline over UCX (1-16)"},
    {GPU_PARAM(hier_rail_min_bytes, SIZE_T, 5, ALL_EQ), GPU_RANGE(0, INT64_MAX, false, ""),
     /* From a model (not yet measured across real nodes): the rails cost a call rails - 1 more
      * node bcasts (a team step, ~10-20 us each over NVLink; the bytes they move are the one
      * node bcast's of the leaders' path) and an agreement of every rank instead of the
      * leaders'.  They save (rails - 1) / rails of the 2 x bytes a leader sends and receives
      * (reduce up, bcast down): ~42 us per MiB with 2 rails at 25 GB/s (a 200 Gb/s NIC per
      * GPU).  That breaks even near 0.5 MiB; and below one UCX chunk (1 MiB) per rail a shard
      * has no pipeline to fill.  So 2 MiB: a full chunk on each of 2 rails. */
     .def = 2 * GPU_MiB,
     .help = "An MPI_Allreduce across nodes of this many bytes or more runs on rails when every "
             "node of the communicator has 2 ranks or more: the message is cut into as many "
             "shards as the smallest node has ranks, and local rank r of every node reduces "
             "shard r with the local rank r of the other nodes (its own UCX pipeline), instead "
             "of node rank 0 carrying the whole message; smaller ones, and every MPI_Bcast, go "
             "through the node leaders.  0: never"},
    {GPU_PARAM(ucx_device_direct, BOOL, 5, ALL_EQ),
     .help = "Hand device buffers to UCX directly (no host copies) where every node leader has "
             "a GPU and a UCX that moves CUDA memory (ucp_context_query: UCS_MEMORY_TYPE_CUDA, "
             "e.g. the libucx-cu13 wheel; Debian's UCX cannot); else, and by default, chunks "
             "are staged through pinned host memory.  Not yet verified on a GPU"},
    {GPU_PARAM(ucx_timeout_seconds, INT, 4, ALL_EQ), GPU_SECONDS,
     .help = "A node leader whose UCX transfers have not moved for this long (seconds) gives "
             "the transfer up: the leaders then redo the step through Open MPI's point-to-point "
             "layer and UCX stays off on that communicator; 0 (default): wait for ever (a slow "
             "peer is not an error)"},
    {GPU_PARAM(test_fail_ucx, INT, 9, ALL_EQ), GPU_RANK, .def = -1,
     .help = "Testing only: on this rank of MPI_COMM_WORLD, when it leads a node (or is on a "
             "rail, coll_gpu_hier_rail_min_bytes), the UCX sends of its first chain across "
             "nodes on each communicator fail after the first one, as after an endpoint error; "
             "-1: off"},
    {GPU_PARAM(test_fail_ucx_silent, BOOL, 9, ALL_EQ),
     .help = "Testing only: the leader of coll_gpu_test_fail_ucx does not tell the other "
             "leaders that its transfers failed (only coll_gpu_ucx_timeout_seconds then ends "
             "their wait)"},
};
#define GPU_NPARAMS (sizeof(gpu_params) / sizeof(gpu_params[0]))

static int64_t gpu_param_value(const gpu_param_t *p)
{
    if (MCA_BASE_VAR_TYPE_SIZE_T == p->type) {
        size_t v = *(size_t *) p->storage;
        return (v > (size_t) INT64_MAX) ? INT64_MAX : (int64_t) v;
    }
    return *(int *) p->storage;
}

/* Store v in p's storage, as its type wants it. */
static void gpu_param_store(const gpu_param_t *p, int64_t v)
{
    switch (p->type) {
    case MCA_BASE_VAR_TYPE_SIZE_T:
        *(size_t *) p->storage = (size_t) v;
        break;
    case MCA_BASE_VAR_TYPE_BOOL:
        *(bool *) p->storage = (0 != v);
        break;
    case MCA_BASE_VAR_TYPE_STRING:
        *(char **) p->storage = NULL;
        break;
    default:
        *(int *) p->storage = (int) v;
        break;
    }
}

static int gpu_register(void)
{
    for (size_t i = 0; i < GPU_NPARAMS; ++i) {
        gpu_param_t *p = &gpu_params[i];
        mca_base_var_enum_t *new_enum = NULL;
        char enum_name[64];

        /* the default, which the registration replaces with what the user gave */
        gpu_param_store(p, p->def);
        if (NULL != p->values) {
            snprintf(enum_name, sizeof(enum_name), "coll_gpu_%s", p->name);
            (void) mca_base_var_enum_create(enum_name, p->values, &new_enum);
        }
        (void) mca_base_component_var_register(&GPU_C->super.collm_version, p->name, p->help,
                                               p->type, new_enum, 0, p->flags, p->level,
                                               p->scope, p->storage);
        if (NULL != new_enum) {
            OBJ_RELEASE(new_enum); /* the variable system keeps its own reference */
        }
    }
    return OMPI_SUCCESS;
}

/* Parse a parameter's string as Open MPI should: an integer (base 0: decimal, 0x hex), an
 * optional k, m or g, blanks around.  Returns false when it is not that; *huge when it does
 * not fit in 63 bits. */
static bool gpu_parse_number(const char *text, int64_t *value, bool *huge)
{
    const char *p = text;
    unsigned long long magnitude;
    bool negative = false;
    char *end = NULL;
    int shift = 0;

    *huge = false;
    while (isspace((unsigned char) *p)) {
        ++p;
    }
    if ('-' == *p || '+' == *p) {
        negative = ('-' == *p);
        ++p;
    }
    if (!isdigit((unsigned char) *p)) {
        return false;
    }
    errno = 0;
    magnitude = strtoull(p, &end, 0);
    *huge = (ERANGE == errno);
    switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: break;
    }
    while (isspace((unsigned char) *end)) {
        ++end;
    }
    if ('\0' != *end) {
        return false;
    }
    if (*huge || magnitude > ((unsigned long long) INT64_MAX >> shift)) {
        *huge = true;
        *value = negative ? INT64_MIN : INT64_MAX;
        return true;
    }
    *value = (int64_t) (magnitude << shift);
    *value = negative ? -*value : *value;
    return true;
}

/* The upper bound of a parameter whose table entry says hi < 0: this machine's memory divided
 * by -hi, at most 1 GiB for the slot; unknown memory: 1 GiB. */
static int64_t gpu_machine_cap(const gpu_param_t *p)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t cap = (0 < pages && 0 < page) ? (int64_t) pages * page / -p->hi : GPU_GiB;

    if (&GPU_C->oneshot_slot_bytes == p->storage && cap > GPU_GiB) {
        cap = GPU_GiB;
    }
    return (cap < p->lo) ? p->lo : cap;
}

/* Check every numeric parameter (ranged) and put a safe value where it is not one. */
static void gpu_check_ranges(void)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    bool speak = (NULL == rank || 0 == strcmp(rank, "0"));

    for (size_t i = 0; i < GPU_NPARAMS; ++i) {
        gpu_param_t *p = &gpu_params[i];
        bool is_size = (MCA_BASE_VAR_TYPE_SIZE_T == p->type), huge = false;
        int64_t hi, value = gpu_param_value(p), fixed;
        char env[96], text[160];
        const char *raw;

        if (!p->ranged) {
            continue;
        }
        hi = (0 > p->hi) ? gpu_machine_cap(p) : p->hi;
        snprintf(env, sizeof(env), "OMPI_MCA_coll_gpu_%s", p->name);
        raw = getenv(env);
        if (NULL != raw && !gpu_parse_number(raw, &value, &huge)) {
            fixed = p->def;
            snprintf(text, sizeof(text), "is not a number");
        } else if (NULL != raw && is_size && 0 > value) {
            fixed = p->def;
            snprintf(text, sizeof(text), "is negative");
        } else if (value < p->lo && !(p->zero_off && 0 == value)) {
            fixed = p->lo;
            snprintf(text, sizeof(text), "is below %" PRId64 "%s", p->lo,
                     p->zero_off ? " (or 0)" : "");
        } else if (value > hi) {
            fixed = hi;
            snprintf(text, sizeof(text), "is above %" PRId64 "%s%s%s", hi,
                     huge ? " (does not even fit in 63 bits)" : "",
                     '\0' != p->why_hi[0] ? ": " : "", p->why_hi);
        } else if (NULL != raw && huge) {
            fixed = p->def;
            snprintf(text, sizeof(text), "does not fit in 63 bits");
        } else {
            continue;
        }
        gpu_param_store(p, fixed);
        if (speak) {
            /* a plain line: 4.1's mpirun garbles help messages that several ranks send in
             * MPI_Init; every rank applies the same rule, rank 0 alone says it */
            opal_output(0, "coll:gpu: coll_gpu_%s=%s %s; coll/gpu uses %" PRId64 " instead%s",
                        p->name, (NULL != raw) ? raw : "(its value)", text, fixed,
                        (fixed == p->def) ? " (the default)" : "");
        }
    }
}

static int gpu_open(void)
{
    char why[512];

    /* help-coll-gpu.txt: installed next to our data, or still in the source tree */
    (void) opal_show_help_add_dir(COLL_GPU_HELP_DIR);
    (void) opal_show_help_add_dir(COLL_GPU_SRC_HELP_DIR);
    /* a module laid out for other headers than the running library's must not be handed out
     * (coll_gpu_compat.h: 5.0.10 changed the layout without changing the API version) */
    if (NULL != coll_gpu_runtime_mismatch(why, sizeof(why))) {
        opal_show_help("help-coll-gpu.txt", "runtime-mismatch", true, why);
        return OMPI_ERR_NOT_SUPPORTED;
    }
    gpu_check_ranges();
    mca_coll_gpu_component.output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_coll_gpu_component.output, mca_coll_gpu_component.verbose);
    return OMPI_SUCCESS;
}

static int gpu_close(void)
{
    mca_coll_gpu_host_watch_finalize();
    mca_coll_gpu_async_finalize();
    if (mca_coll_gpu_component.dev_opened) {
        /* the requests' copies back end, then their bounce memory goes: before the device */
        mca_coll_gpu_copyback_finalize();
        mca_coll_gpu_pinned_finalize();
    }
    mca_coll_gpu_ucx_finalize();
    mca_coll_gpu_gapfill_finalize();
    mca_coll_gpu_defer_finalize();
    mca_coll_gpu_topo_finalize();
    mca_coll_gpu_memhooks_fini();
    if (mca_coll_gpu_component.dev_opened) {
        mca_coll_gpu_ipcmap_finalize();
        dev_close();
        mca_coll_gpu_component.dev_opened = false;
    }
    mca_coll_gpu_component.dev_tried = false;
    if (0 <= mca_coll_gpu_component.output) {
        opal_output_close(mca_coll_gpu_component.output);
        mca_coll_gpu_component.output = -1;
    }
    return OMPI_SUCCESS;
}

bool mca_coll_gpu_test_fail_alloc(const char *site)
{
    const char *want = mca_coll_gpu_component.test_fail_alloc_site;

    return 0 <= mca_coll_gpu_component.test_fail_alloc && NULL != want
           && 0 == strcmp(want, site)
           && mca_coll_gpu_component.test_fail_alloc
                  == coll_gpu_world_rank();
}

bool mca_coll_gpu_test_env_names_me(const char *name, int *target)
{
    if (-2 == *target) {
        const char *env = getenv(name);
        *target = (NULL != env && '\0' != env[0]) ? atoi(env) : -1;
    }
    return 0 <= *target && coll_gpu_world_rank() == *target;
}

static int request_cancel(ompi_request_t *req, int complete)
{
    (void) req;
    (void) complete;
    return OMPI_SUCCESS; /* a collective cannot be cancelled: the call runs to its end */
}

void mca_coll_gpu_request_init(ompi_request_t *req, struct ompi_communicator_t *comm,
                               bool persistent, ompi_request_free_fn_t free_fn)
{
    OMPI_REQUEST_INIT(req, persistent);
    req->req_type = OMPI_REQUEST_COLL;
    if (!persistent) {
        req->req_state = OMPI_REQUEST_ACTIVE;
    }
    req->req_free = free_fn;
    req->req_cancel = request_cancel;
    req->req_mpi_object.comm = comm;
    req->req_status.MPI_SOURCE = MPI_ANY_SOURCE;
    req->req_status.MPI_TAG = MPI_ANY_TAG;
    req->req_status.MPI_ERROR = MPI_SUCCESS;
    req->req_status._cancelled = 0;
    req->req_status._ucount = 0;
}
