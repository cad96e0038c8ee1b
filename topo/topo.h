/*
 * topo.h - the node model of coll/gpu and its queries.
 *
 * The model describes one node: its GPUs (by UUID and PCI bus id), the link between every pair
 * of GPUs (NVLink, NVSwitch or a PCIe path, with a bandwidth), its NICs and their PCIe distance
 * to each GPU, and its NUMA nodes.  It is made by topo_probe() (NVML, CUDA through callbacks
 * the caller supplies, hwloc) or loaded from a text file (topo/FORMAT.md), and it can be dumped
 * to that format.  On top of it:
 *
 *   topo_search.c  link labels, rings that maximise the slowest hop, bcast trees, peer access
 *                  under a P2P level, team summaries with a warning when links are mixed;
 *   topo_select.c  the one decision table: collective, size, team -> algorithm and chunking.
 *
 * This library knows nothing of MPI and links no CUDA: the component (mca-coll-gpu/) hands the
 * probe its device-layer functions through topo_gpu_probe_ops_t.  Nothing here keeps global
 * state, so every function is safe to call from several threads on different models.
 *
 * Numbering: model GPUs are numbered 0..ngpus-1 in PCI bus id order (as nvidia-smi and
 * CUDA_DEVICE_ORDER=PCI_BUS_ID number them), never by a process's CUDA ordinal, which changes
 * with CUDA_VISIBLE_DEVICES.  A "team" is an array of model GPU indices, one per rank of the
 * node team, in node-rank order; several ranks may share one GPU.  Search results (rings,
 * trees) are positions in that team array.
 *
 * Functions returning int return TOPO_OK (0) or a negative topo_status_t.
 */
#ifndef COLL_GPU_TOPO_H
#define COLL_GPU_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TOPO_MAX_GPUS 64
#define TOPO_MAX_NICS 64
#define TOPO_MAX_NUMA 64
#define TOPO_UUID_BYTES 16
#define TOPO_UUID_STRLEN 41  /* "GPU-" + 36 characters + NUL */
#define TOPO_BUSID_LEN 24    /* "0000:3b:00.0" (or an 8-digit domain) + NUL */
#define TOPO_NAME_LEN 64
#define TOPO_CPUS_LEN 256    /* a CPU list in hwloc's list syntax, "0-55,112-167" */
#define TOPO_TEXT_LEN 512    /* source, warnings, reasons */
#define TOPO_LABEL_LEN 16    /* "NV18", "NVS18", "PIX" */
#define TOPO_ERR_LEN 256

/* Bandwidths are MB/s in one direction (1 GB/s = 1000 MB/s), integers so that a dump and a
 * load give back exactly the same model. */
#define TOPO_BW_LOCAL 2000000u /* two ranks on one GPU: a device-local copy, ~2 TB/s */

typedef enum {
    TOPO_OK = 0,
    TOPO_ERR = -1,         /* generic failure; see the error text where one is returned */
    TOPO_ERR_ARG = -2,     /* bad argument */
    TOPO_ERR_NOMEM = -3,
    TOPO_ERR_IO = -4,      /* a file could not be read or written */
    TOPO_ERR_PARSE = -5,   /* a malformed topology file (the error text names the line) */
    TOPO_ERR_NOTFOUND = -6 /* no such GPU, library or object */
} topo_status_t;

/* The class of the path between two GPUs, best first.  The order matters: a P2P level allows
 * every class up to and including its own, and a team's class is the worst of its pairs. */
typedef enum {
    TOPO_LINK_X = 0,   /* the same GPU */
    TOPO_LINK_NVL = 1, /* direct NVLinks (topo_link_t.nvlinks of them): "NV<n>" */
    TOPO_LINK_NVS = 2, /* NVLink through NVSwitches: "NVS<n>", n usable links per GPU */
    TOPO_LINK_PIX = 3, /* at most one PCIe switch */
    TOPO_LINK_PXB = 4, /* several PCIe switches, no host bridge */
    TOPO_LINK_PHB = 5, /* through a PCIe host bridge (CPU) of one NUMA node */
    TOPO_LINK_SYS = 6, /* across the SMP interconnect between NUMA nodes or sockets */
    TOPO_LINK_COUNT
} topo_link_class_t;

/* coll_gpu_p2p_level (NCCL_P2P_LEVEL): the worst path over which peer access is used. */
typedef enum {
    TOPO_P2P_LEVEL_AUTO = 0, /* PXB, NCCL's default: NVLink and PCIe switches, no CPU */
    TOPO_P2P_LEVEL_NVL = 1,  /* NVLink and NVSwitch only */
    TOPO_P2P_LEVEL_PIX = 2,
    TOPO_P2P_LEVEL_PXB = 3,
    TOPO_P2P_LEVEL_PHB = 4,
    TOPO_P2P_LEVEL_SYS = 5,
    TOPO_P2P_LEVEL_COUNT
} topo_p2p_level_t;

typedef enum {
    TOPO_NIC_IB = 0,   /* InfiniBand (verbs device, link layer InfiniBand) */
    TOPO_NIC_ROCE = 1, /* verbs device whose link layer is Ethernet */
    TOPO_NIC_ETH = 2,  /* plain Ethernet network interface */
    TOPO_NIC_KIND_COUNT
} topo_nic_kind_t;

typedef struct {
    uint8_t uuid[TOPO_UUID_BYTES];
    char bus_id[TOPO_BUSID_LEN]; /* normalised: lower case, "dddd:bb:dd.f" */
    char name[TOPO_NAME_LEN];    /* "NVIDIA H200"; "" when unknown */
    int numa;                    /* OS index of the nearest NUMA node; -1 unknown or several */
    char cpus[TOPO_CPUS_LEN];    /* CPUs near the GPU (list syntax); "" unknown */
    int sm;                      /* compute capability major*10+minor; 0 unknown */
    int pcie_gen, pcie_width;    /* PCIe link of the GPU; 0 unknown */
    int nvswitch_links;          /* active NVLinks going to NVSwitches */
    uint32_t nvlink_bw;          /* MB/s of one NVLink, one direction; 0 no NVLink */
} topo_gpu_t;

/* The path between GPUs a and b; links[a][b] == links[b][a]. */
typedef struct {
    topo_link_class_t cls;
    int nvlinks;       /* NVL: links between the pair; NVS: links per GPU usable for the pair */
    uint32_t bw;       /* MB/s, one direction */
    int8_t p2p;        /* the driver allows peer access: 1 yes, 0 no, -1 unknown */
    int8_t atomics;    /* native atomics over the path: 1, 0, -1 unknown */
    int8_t perf_rank;  /* CUDA's relative P2P performance rank (lower is better); -1 unknown */
} topo_link_t;

typedef struct {
    char name[TOPO_NAME_LEN];   /* "mlx5_0" (verbs) or "eth0" (Ethernet) */
    topo_nic_kind_t kind;
    char bus_id[TOPO_BUSID_LEN];
    char netdev[TOPO_NAME_LEN]; /* the network interface of a verbs device, "" when none */
    int numa;                   /* -1 unknown */
    uint32_t speed;             /* Mb/s; 0 unknown */
} topo_nic_t;

typedef struct {
    int os_index;
    int package;              /* OS index of the socket; -1 unknown */
    char cpus[TOPO_CPUS_LEN];
} topo_numa_t;

typedef struct topo {
    char host[TOPO_NAME_LEN];
    char source[TOPO_TEXT_LEN]; /* how the model was made: "probe: NVML 580.65, CUDA, hwloc" */
    int ngpus, nnics, nnuma;
    topo_gpu_t gpus[TOPO_MAX_GPUS];
    topo_nic_t nics[TOPO_MAX_NICS];
    topo_numa_t numa[TOPO_MAX_NUMA];
    topo_link_t links[TOPO_MAX_GPUS][TOPO_MAX_GPUS];
    topo_link_class_t gpu_nic[TOPO_MAX_GPUS][TOPO_MAX_NICS]; /* PCIe class GPU <-> NIC */
} topo_t;

/* ---- model: topo_model.c --------------------------------------------------------------- */

/* An empty model (no GPUs, no NICs), or NULL when out of memory.  Free with topo_free. */
topo_t *topo_new(void);
void topo_free(topo_t *topo);
/* True when both models hold the same node (every field the file format carries). */
bool topo_equal(const topo_t *a, const topo_t *b);

/* Index of the GPU with this UUID / PCI bus id (any case, 4- or 8-digit domain), or -1. */
int topo_find_gpu_by_uuid(const topo_t *topo, const uint8_t uuid[TOPO_UUID_BYTES]);
int topo_find_gpu_by_bus_id(const topo_t *topo, const char *bus_id);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" <-> 16 bytes.  Parse accepts the "GPU-" prefix
 * optionally and returns TOPO_ERR_PARSE on anything else. */
void topo_uuid_format(const uint8_t uuid[TOPO_UUID_BYTES], char out[TOPO_UUID_STRLEN]);
int topo_uuid_parse(const char *text, uint8_t uuid[TOPO_UUID_BYTES]);
/* "0000:3B:00.0", "00000000:3b:00.0" or "3b:00.0" -> "0000:3b:00.0". */
int topo_bus_id_normalize(const char *in, char *out, size_t len);

/* Estimated bandwidths used where the probe or a file gives none (see FORMAT.md). */
uint32_t topo_nvlink_bw_for_sm(int sm);
uint32_t topo_pcie_bw(int gen, int width);
/* The estimated bandwidth of links[a][b] from its class, link count and the GPUs' NVLink
 * and PCIe properties (FORMAT.md, "Estimated bandwidths"). */
uint32_t topo_default_link_bw(const topo_t *topo, int a, int b);
/* Set links[a][b] and links[b][a]; bw 0 means the default for the class. */
void topo_set_link(topo_t *topo, int a, int b, topo_link_class_t cls, int nvlinks, uint32_t bw);

/* ---- names: topo_model.c ---------------------------------------------------------------- */

const char *topo_link_class_name(topo_link_class_t cls); /* "X", "NVL", "NVS", "PIX", ... */
int topo_link_class_from_name(const char *name);         /* -1 when unknown */
const char *topo_p2p_level_name(topo_p2p_level_t level); /* "auto", "NVL", ... "SYS" */
int topo_p2p_level_from_name(const char *name);          /* case-insensitive; -1 unknown */
const char *topo_nic_kind_name(topo_nic_kind_t kind);    /* "ib", "roce", "eth" */
int topo_nic_kind_from_name(const char *name);

/* ---- file: topo_file.c (format in topo/FORMAT.md) --------------------------------------- */

/* Write the model; TOPO_ERR_IO when the stream fails. */
int topo_dump(const topo_t *topo, FILE *out);
int topo_dump_file(const topo_t *topo, const char *path, char *err, size_t errlen);
/* The dump as one malloc'ed NUL-terminated string (for sending a node leader's model). */
int topo_dump_string(const topo_t *topo, char **text);

/* Parse a model.  On failure *out is NULL and err holds "NAME:LINE: what is wrong" (NAME is
 * the path, or the name given to topo_load_string). */
int topo_load_file(const char *path, topo_t **out, char *err, size_t errlen);
int topo_load_string(const char *text, const char *name, topo_t **out, char *err,
                     size_t errlen);

/* ---- probe: topo_probe.c ---------------------------------------------------------------- */

/* The device queries the probe needs, supplied by the caller so that this library links no
 * CUDA.  Every function returns 0 on success and anything else on failure; the ordinals are
 * the calling process's CUDA ordinals.  The first four match kernels/dev.h except uuid:
 *
 *     static int uuid_of(int ordinal, uint8_t uuid[16])
 *     {
 *         dev_uuid_t u;
 *         int rc = dev_device_uuid(ordinal, &u);
 *         memcpy(uuid, u.bytes, 16);
 *         return rc;
 *     }
 *     topo_gpu_probe_ops_t ops = { .device_count = dev_device_count,
 *                                  .device_uuid = uuid_of,
 *                                  .device_pci_bus_id = dev_device_pci_bus_id,
 *                                  .device_can_access_peer = dev_device_can_access_peer };
 *
 * The optional ones may be NULL. */
typedef enum {
    TOPO_P2P_ATTR_PERF_RANK = 1,      /* cudaDevP2PAttrPerformanceRank */
    TOPO_P2P_ATTR_ACCESS = 2,         /* cudaDevP2PAttrAccessSupported */
    TOPO_P2P_ATTR_NATIVE_ATOMICS = 3  /* cudaDevP2PAttrNativeAtomicSupported */
} topo_p2p_attr_t;

typedef struct {
    int (*device_count)(int *count);
    int (*device_uuid)(int ordinal, uint8_t uuid[TOPO_UUID_BYTES]);
    int (*device_pci_bus_id)(int ordinal, char *buf, size_t len);
    int (*device_can_access_peer)(int ordinal, int peer_ordinal, bool *can);
    /* optional */
    int (*device_name)(int ordinal, char *buf, size_t len);
    int (*device_sm)(int ordinal, int *major, int *minor);
    int (*device_p2p_attr)(int ordinal, int peer_ordinal, topo_p2p_attr_t attr, int *value);
} topo_gpu_probe_ops_t;

/* Levels of the log callback (the component maps them onto its verbosity levels). */
enum { TOPO_LOG_ERROR = 1, TOPO_LOG_WARN = 2, TOPO_LOG_INFO = 3, TOPO_LOG_DEBUG = 4 };
typedef void (*topo_log_fn_t)(void *ctx, int level, const char *msg);

typedef struct {
    const topo_gpu_probe_ops_t *gpu_ops; /* NULL: no CUDA view (NVML and hwloc only) */
    topo_log_fn_t log;                   /* NULL: quiet; the status text is in topo->source */
    void *log_ctx;
    bool no_nvml;                        /* do not load NVML (tests, or a broken driver) */
    bool no_hwloc;                       /* do not ask hwloc (no NUMA, NICs or PCIe paths) */
    const char *nvml_library;            /* NULL: "libnvidia-ml.so.1" */
} topo_probe_opts_t;

/* Build the model of this node.  Never fails for a missing driver, NVML or GPU: the model is
 * then smaller (maybe no GPUs) and topo->source says what was missing; the log callback gets
 * one line per source.  TOPO_ERR_NOMEM is the only hard failure. */
int topo_probe(const topo_probe_opts_t *opts, topo_t **out);

/* ---- search: topo_search.c -------------------------------------------------------------- */

/* "NV18", "NVS18", "PIX", "X" ... for a link, as the matrix and the logs print it. */
const char *topo_link_label(const topo_link_t *link, char buf[TOPO_LABEL_LEN]);

/* May GPUs a and b use peer access?  Same GPU: always.  Otherwise no when disabled, when the
 * driver said no, or when the class is worse than the level.  why (may be NULL) gets a static
 * string naming the reason. */
bool topo_p2p_allowed(const topo_t *topo, int a, int b, topo_p2p_level_t level, bool disable,
                      const char **why);

/* A ring through the team (n positions, team[i] a model GPU index) maximising the slowest hop,
 * then the next slowest, and so on; ranks sharing a GPU sit next to each other.  order[0] is 0
 * (node rank 0); the result depends only on the model and the team, so every rank computes the
 * same ring.  Exact for up to 9 distinct GPUs, a greedy walk improved by 2-opt above.
 * *slowest (may be NULL) gets the bandwidth of the slowest hop (MB/s; TOPO_BW_LOCAL when the
 * team has one GPU). */
int topo_ring(const topo_t *topo, const int *team, int n, int *order, uint32_t *slowest);

typedef enum {
    TOPO_TREE_CHAIN = 0, /* the ring from the root, dropping the slower hop next to the root */
    TOPO_TREE_BINARY = 1 /* at most two children, widest links first, then shallowest */
} topo_tree_shape_t;

/* A broadcast tree rooted at team position root: parent[i] is the position of i's parent and
 * parent[root] is -1.  ring is the team's ring (NULL: computed here); it shapes the chain. */
int topo_tree(const topo_t *topo, const int *team, int n, int root, topo_tree_shape_t shape,
              const int *ring, int *parent);
/* The children of node in a parent array, in position order; returns how many (<= max). */
int topo_tree_children(const int *parent, int n, int node, int *children, int max);
/* Number of edges on the longest root-to-leaf path. */
int topo_tree_depth(const int *parent, int n);

/* What selection and logs need to know about a team. */
typedef struct {
    int n;                       /* ranks */
    int ngpus;                   /* distinct GPUs */
    topo_link_class_t worst;     /* worst class between two distinct GPUs (X: one GPU) */
    topo_link_class_t best;
    int nvlinks;                 /* NVLinks of the worst pair when it is NVL or NVS */
    uint32_t slowest_bw;         /* slowest pair (MB/s) */
    uint32_t ring_bw;            /* slowest hop of the ring */
    bool p2p_all;                /* peer access allowed between every pair */
    bool p2p_ring;               /* allowed between every pair of ring neighbours */
    bool mixed;                  /* the pairs do not all have the same kind of link */
    char label[TOPO_LABEL_LEN];  /* label of the worst pair, e.g. "NV18" */
    char warning[TOPO_TEXT_LEN]; /* "" unless mixed (or peer access is partly refused) */
} topo_team_info_t;

/* Summarise a team under a P2P policy.  ring may be NULL (computed here). */
int topo_team_info(const topo_t *topo, const int *team, int n, const int *ring,
                   topo_p2p_level_t level, bool disable, topo_team_info_t *info);

/* ---- selection: topo_select.c ----------------------------------------------------------- */

typedef enum {
    TOPO_COLL_ALLREDUCE = 0,
    TOPO_COLL_BCAST = 1,
    TOPO_COLL_COUNT
} topo_coll_t;

/* These numeric values are registered as MCA enums and written through MPI_T: keep them. */
typedef enum {
    TOPO_AR_AUTO = 0,
    TOPO_AR_STAGED = 1,  /* through pinned host buffers and the host allreduce */
    TOPO_AR_ONESHOT = 2, /* every rank reads every peer's buffer and reduces all of it */
    TOPO_AR_TWOSHOT = 3, /* reduce-scatter then all-gather, both by peer loads/stores */
    TOPO_AR_RING = 4,    /* pipelined ring reduce-scatter + all-gather between neighbours */
    TOPO_AR_FUSED = 5,   /* one kernel: push to peers' scratch, flags over NVLink, reduce */
    TOPO_AR_TWOSHOT_CE = 6, /* two-shot whose transfers are copy-engine pulls, pipelined with
                               the local reduce */
    TOPO_AR_COUNT
} topo_allreduce_alg_t;

typedef enum {
    TOPO_BC_AUTO = 0,
    TOPO_BC_STAGED = 1, /* through pinned host buffers and the host bcast */
    TOPO_BC_PUSH = 2,   /* the root's data goes straight to every peer */
    TOPO_BC_CHAIN = 3,  /* pipelined chain along the ring from the root */
    TOPO_BC_TREE = 4,   /* pipelined binary tree */
    TOPO_BC_PULL = 5,   /* every non-root copies the root's buffer with its copy engine */
    TOPO_BC_COUNT
} topo_bcast_alg_t;

/* {value, name} pairs ending with {0, NULL}, laid out like mca_base_var_enum_value_t. */
typedef struct {
    int value;
    const char *name;
} topo_enum_value_t;

extern const topo_enum_value_t topo_allreduce_alg_values[];
extern const topo_enum_value_t topo_bcast_alg_values[];
extern const topo_enum_value_t topo_p2p_level_values[];

const char *topo_coll_name(topo_coll_t coll);                /* "allreduce", "bcast" */
const char *topo_alg_name(topo_coll_t coll, int alg);        /* "oneshot", "chain", "?" */
int topo_alg_from_name(topo_coll_t coll, const char *name); /* -1 when unknown */
/* Whether an algorithm moves data by peer loads/stores between all pairs (oneshot, twoshot,
 * push, tree), between ring neighbours only (ring, chain), or not at all (staged). */
bool topo_alg_needs_p2p_all(topo_coll_t coll, int alg);
bool topo_alg_needs_p2p_ring(topo_coll_t coll, int alg);
/* Whether an algorithm's kernels wait on each other across ranks (fused): ranks sharing a GPU
 * time-slice it, so the table gives such an algorithm only to teams with a GPU per rank. */
bool topo_alg_needs_own_gpu(topo_coll_t coll, int alg);

typedef struct {
    topo_coll_t coll;
    size_t bytes;            /* message size */
    int ranks_per_node;      /* ranks in the node team */
    int nodes;
    int gpus_per_node;       /* distinct GPUs in the node team */
    topo_link_class_t link;  /* the team's worst class (topo_team_info_t.worst) */
    int nvlinks;             /* for the reason text (topo_team_info_t.nvlinks) */
    bool p2p_all;            /* topo_team_info_t.p2p_all */
    bool p2p_ring;           /* topo_team_info_t.p2p_ring */
    /* overrides (MCA parameters); 0 means "the table decides" */
    int forced_alg;          /* topo_allreduce_alg_t or topo_bcast_alg_t */
    int nblocks;
    int nthreads;
    size_t chunk_bytes;
    bool quiet;              /* leave plan.reason empty: the caller will not print it (the text
                                costs a few hundred ns per call, on the small-message path) */
} topo_select_in_t;

typedef struct {
    int alg;                      /* never *_AUTO */
    int nblocks;                  /* thread blocks for the kernel */
    int nthreads;                 /* threads per block */
    size_t chunk_bytes;           /* pipeline chunk; 0 when the algorithm is not pipelined */
    size_t nchunks;               /* chunks the message is cut into (1 when not pipelined) */
    bool forced;                  /* an override chose the algorithm */
    char reason[TOPO_TEXT_LEN];   /* one line: why, for coll_gpu_verbose ("" when quiet) */
} topo_plan_t;

/* The decision (topo_select.c holds the table and the rules around it).  Depends only on its
 * input, so ranks that agree on the input agree on the plan. */
void topo_select(const topo_select_in_t *in, topo_plan_t *plan);
/* Fill the team part of a selection input from a summary (coll, bytes, overrides untouched). */
void topo_select_in_from_team(topo_select_in_t *in, const topo_team_info_t *team, int nodes);

#ifdef __cplusplus
}
#endif

#endif /* COLL_GPU_TOPO_H */
