/*
 * coll_gpu_topo.c - the coll_gpu_topo command: show the node model coll/gpu works from.
 *
 * Probes this node (NVML, CUDA through libcuda loaded at run time, hwloc) or loads a model
 * file, then prints it as a matrix in the manner of `nvidia-smi topo -m` (GPUs and NICs, CPU
 * and NUMA affinity), the GPUs, NICs and NUMA nodes, the peer-access matrix under the chosen
 * coll_gpu_p2p_level, the ring and the bcast trees of the team, and the algorithm that
 * coll/gpu would choose for MPI_Allreduce and MPI_Bcast at each size from 8 B to 1 GiB.
 * --dump writes the model in the text format of topo/FORMAT.md.
 *
 * Only this tool opens libcuda itself; the component hands the probe its device layer.  On a
 * machine without driver or GPU it says so and still prints what hwloc sees.
 */
#include "topo.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CUDA driver API, loaded at run time (prototypes of cuda.h, CUDA 11.4 and later) ---- */

typedef int cu_result_t; /* CUDA_SUCCESS == 0 */
typedef int cu_device_t;

static struct {
    void *lib;
    cu_result_t (*init)(unsigned int);
    cu_result_t (*count)(int *);
    cu_result_t (*get)(cu_device_t *, int);
    cu_result_t (*uuid)(void *, cu_device_t); /* CUuuid: 16 bytes */
    cu_result_t (*bus_id)(char *, int, cu_device_t);
    cu_result_t (*name)(char *, int, cu_device_t);
    cu_result_t (*attr)(int *, int, cu_device_t);
    cu_result_t (*can_access)(int *, cu_device_t, cu_device_t);
    cu_result_t (*p2p_attr)(int *, int, cu_device_t, cu_device_t);
    cu_result_t (*error_string)(cu_result_t, const char **);
} cu;

#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76

/*
 * The probe callbacks over the driver API.  They map the probe's CUDA ordinals to CUdevice
 * handles on every call: cheap, and the tool probes once.  Each returns the CUresult (0 on
 * success), which is all topo_probe() looks at.
 */
static int cu_count(int *count)
{
    return cu.count(count);
}

static int cu_uuid(int ordinal, uint8_t uuid[TOPO_UUID_BYTES])
{
    cu_device_t d;
    int rc = cu.get(&d, ordinal);
    return (0 != rc) ? rc : cu.uuid(uuid, d);
}

static int cu_bus_id(int ordinal, char *buf, size_t len)
{
    cu_device_t d;
    int rc = cu.get(&d, ordinal);
    return (0 != rc) ? rc : cu.bus_id(buf, (int) len, d);
}

static int cu_can_access(int ordinal, int peer, bool *can)
{
    cu_device_t a, b;
    int v = 0, rc = cu.get(&a, ordinal);
    rc = (0 != rc) ? rc : cu.get(&b, peer);
    rc = (0 != rc) ? rc : cu.can_access(&v, a, b);
    *can = (0 == rc && 0 != v);
    return rc;
}

static int cu_name(int ordinal, char *buf, size_t len)
{
    cu_device_t d;
    int rc = cu.get(&d, ordinal);
    return (0 != rc || NULL == cu.name) ? -1 : cu.name(buf, (int) len, d);
}

static int cu_sm(int ordinal, int *major, int *minor)
{
    cu_device_t d;
    int rc = cu.get(&d, ordinal);
    if (0 != rc || NULL == cu.attr) {
        return -1;
    }
    rc = cu.attr(major, CU_ATTR_CC_MAJOR, d);
    return (0 != rc) ? rc : cu.attr(minor, CU_ATTR_CC_MINOR, d);
}

static int cu_p2p_attr(int ordinal, int peer, topo_p2p_attr_t attr, int *value)
{
    cu_device_t a, b;
    int rc = cu.get(&a, ordinal);
    if (0 != rc || NULL == cu.p2p_attr) {
        return -1;
    }
    rc = cu.get(&b, peer);
    /* topo_p2p_attr_t uses CUdevice_P2PAttribute's values (1, 2, 3) */
    return (0 != rc) ? rc : cu.p2p_attr(value, (int) attr, a, b);
}

/* The probe callbacks over libcuda, or NULL with the reason in why. */
static const topo_gpu_probe_ops_t *cuda_ops(char *why, size_t len)
{
    static topo_gpu_probe_ops_t ops;
    int rc;
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (NULL == cu.lib) {
        const char *e = dlerror();
        snprintf(why, len, "no NVIDIA driver (%s)", (NULL != e) ? e : "libcuda.so.1 not found");
        return NULL;
    }
#define SYM(field, name) (*(void **) &cu.field = dlsym(cu.lib, name))
    SYM(init, "cuInit");
    SYM(count, "cuDeviceGetCount");
    SYM(get, "cuDeviceGet");
    SYM(uuid, "cuDeviceGetUuid_v2");
    if (NULL == cu.uuid) {
        SYM(uuid, "cuDeviceGetUuid");
    }
    SYM(bus_id, "cuDeviceGetPCIBusId");
    SYM(name, "cuDeviceGetName");
    SYM(attr, "cuDeviceGetAttribute");
    SYM(can_access, "cuDeviceCanAccessPeer");
    SYM(p2p_attr, "cuDeviceGetP2PAttribute");
    SYM(error_string, "cuGetErrorString");
#undef SYM
    if (NULL == cu.init || NULL == cu.count || NULL == cu.get || NULL == cu.uuid ||
        NULL == cu.bus_id || NULL == cu.can_access) {
        snprintf(why, len, "the NVIDIA driver library lacks entry points this tool needs");
        return NULL;
    }
    rc = cu.init(0);
    if (0 != rc) {
        const char *e = NULL;
        if (NULL != cu.error_string) {
            cu.error_string(rc, &e);
        }
        snprintf(why, len, "cuInit failed: %s (error %d)", (NULL != e) ? e : "?", rc);
        return NULL;
    }
    ops.device_count = cu_count;
    ops.device_uuid = cu_uuid;
    ops.device_pci_bus_id = cu_bus_id;
    ops.device_can_access_peer = cu_can_access;
    ops.device_name = cu_name;
    ops.device_sm = cu_sm;
    ops.device_p2p_attr = cu_p2p_attr;
    return &ops;
}

/* ---- options ---------------------------------------------------------------------------- */

typedef struct {
    const char *load;
    const char *dump;
    int ranks_per_node; /* 0: one rank per GPU */
    int nodes;
    int team[1024];
    int nteam;          /* from --gpus; 0: derived */
    topo_p2p_level_t level;
    bool p2p_disable;
    int ar_alg, bc_alg, blocks, threads;
    size_t chunk;
    bool no_nvml, no_cuda, no_hwloc, verbose, reasons, quiet;
} options_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: coll_gpu_topo [options]\n"
            "Show the node model of coll/gpu: GPU/NIC matrix, rings, trees, algorithm table.\n"
            "\n"
            "  -l, --load FILE          read the model from FILE instead of probing this node\n"
            "  -d, --dump FILE          write the model to FILE ('-' for standard output)\n"
            "  -r, --ranks-per-node N   ranks on the node (default: one per GPU); rank r uses\n"
            "                           GPU r mod (number of GPUs)\n"
            "  -g, --gpus LIST          the GPU of each rank, e.g. 0,1,0,1 (overrides -r)\n"
            "  -n, --nodes N            nodes in the job (default 1)\n"
            "  -p, --p2p-level LEVEL    auto, NVL, PIX, PXB, PHB or SYS (coll_gpu_p2p_level)\n"
            "  -P, --p2p-disable        as coll_gpu_p2p_disable=1\n"
            "  -a, --allreduce-alg ALG  force auto|staged|oneshot|twoshot|ring\n"
            "  -b, --bcast-alg ALG      force auto|staged|push|chain|tree\n"
            "      --blocks N, --threads N, --chunk BYTES   kernel overrides\n"
            "      --reasons            print the reason of every decision in the table\n"
            "      --no-nvml, --no-cuda, --no-hwloc          leave a probe source out\n"
            "  -q, --quiet              with --dump: print nothing else\n"
            "  -v, --verbose            log the probe\n"
            "  -h, --help\n");
}

/* "--gpus 0,1,0,1": the GPU of each rank, so that teams with shared GPUs can be shown. */
static int parse_gpus(const char *s, options_t *o)
{
    char *end;
    o->nteam = 0;
    while ('\0' != *s) {
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v >= TOPO_MAX_GPUS ||
            o->nteam == (int) (sizeof(o->team) / sizeof(o->team[0]))) {
            return -1;
        }
        o->team[o->nteam++] = (int) v;
        s = end;
        if (',' == *s) {
            ++s;
        } else if ('\0' != *s) {
            return -1;
        }
    }
    return (o->nteam > 0) ? 0 : -1;
}

/* Numbers must be whole positive words; bad input prints why and returns -1 (exit 2). */
static int parse_options(int argc, char **argv, options_t *o)
{
    enum { OPT_BLOCKS = 256, OPT_THREADS, OPT_CHUNK, OPT_REASONS, OPT_NO_NVML, OPT_NO_CUDA,
           OPT_NO_HWLOC };
    static const struct option longopts[] = {
        {"load", required_argument, NULL, 'l'},
        {"dump", required_argument, NULL, 'd'},
        {"ranks-per-node", required_argument, NULL, 'r'},
        {"gpus", required_argument, NULL, 'g'},
        {"nodes", required_argument, NULL, 'n'},
        {"p2p-level", required_argument, NULL, 'p'},
        {"p2p-disable", no_argument, NULL, 'P'},
        {"allreduce-alg", required_argument, NULL, 'a'},
        {"bcast-alg", required_argument, NULL, 'b'},
        {"blocks", required_argument, NULL, OPT_BLOCKS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"chunk", required_argument, NULL, OPT_CHUNK},
        {"reasons", no_argument, NULL, OPT_REASONS},
        {"no-nvml", no_argument, NULL, OPT_NO_NVML},
        {"no-cuda", no_argument, NULL, OPT_NO_CUDA},
        {"no-hwloc", no_argument, NULL, OPT_NO_HWLOC},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    memset(o, 0, sizeof(*o));
    o->nodes = 1;
    while (-1 != (c = getopt_long(argc, argv, "l:d:r:g:n:p:Pa:b:qvh", longopts, NULL))) {
        char *end = NULL;
        long v = 0;
        if (NULL != optarg && ('r' == c || 'n' == c || OPT_BLOCKS == c || OPT_THREADS == c ||
                               OPT_CHUNK == c)) {
            errno = 0;
            v = strtol(optarg, &end, 10);
            if ('\0' == *optarg || '\0' != *end || 0 != errno || v < 1 || v > (1L << 40)) {
                fprintf(stderr, "coll_gpu_topo: '%s' is not a positive number\n", optarg);
                return -1;
            }
        }
        switch (c) {
        case 'l':
            o->load = optarg;
            break;
        case 'd':
            o->dump = optarg;
            break;
        case 'r':
            if (v > 1024) {
                fprintf(stderr, "coll_gpu_topo: at most 1024 ranks per node\n");
                return -1;
            }
            o->ranks_per_node = (int) v;
            break;
        case 'g':
            if (0 != parse_gpus(optarg, o)) {
                fprintf(stderr, "coll_gpu_topo: --gpus wants GPU indices like 0,1,2,3\n");
                return -1;
            }
            break;
        case 'n':
            o->nodes = (int) ((v > 1000000) ? 1000000 : v);
            break;
        case 'p': {
            int lv = topo_p2p_level_from_name(optarg);
            if (lv < 0) {
                fprintf(stderr, "coll_gpu_topo: p2p level '%s': use auto, NVL, PIX, PXB, PHB "
                        "or SYS\n", optarg);
                return -1;
            }
            o->level = (topo_p2p_level_t) lv;
            break;
        }
        case 'P':
            o->p2p_disable = true;
            break;
        case 'a':
        case 'b': {
            topo_coll_t coll = ('a' == c) ? TOPO_COLL_ALLREDUCE : TOPO_COLL_BCAST;
            int alg = topo_alg_from_name(coll, optarg);
            if (alg < 0) {
                fprintf(stderr, "coll_gpu_topo: unknown %s algorithm '%s'\n",
                        topo_coll_name(coll), optarg);
                return -1;
            }
            *(('a' == c) ? &o->ar_alg : &o->bc_alg) = alg;
            break;
        }
        case OPT_BLOCKS:
            o->blocks = (int) ((v > 65535) ? 65535 : v);
            break;
        case OPT_THREADS:
            o->threads = (int) ((v > 1024) ? 1024 : v);
            break;
        case OPT_CHUNK:
            o->chunk = (size_t) v;
            break;
        case OPT_REASONS:
            o->reasons = true;
            break;
        case OPT_NO_NVML:
            o->no_nvml = true;
            break;
        case OPT_NO_CUDA:
            o->no_cuda = true;
            break;
        case OPT_NO_HWLOC:
            o->no_hwloc = true;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "coll_gpu_topo: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* ---- printing --------------------------------------------------------------------------- */

/* --verbose: the probe's log lines go to stderr so that stdout stays the report. */
static void log_to_stderr(void *ctx, int level, const char *msg)
{
    static const char *const names[] = {"", "error", "warning", "info", "debug"};
    (void) ctx;
    fprintf(stderr, "[%s] %s\n", (level >= 1 && level <= 4) ? names[level] : "?", msg);
}

static const char *gbs(uint32_t mbs, char *buf, size_t len)
{
    if (0 == mbs % 1000) {
        snprintf(buf, len, "%u GB/s", mbs / 1000);
    } else {
        snprintf(buf, len, "%.1f GB/s", mbs / 1000.0);
    }
    return buf;
}

static const char *size_name(size_t bytes, char *buf, size_t len)
{
    if (bytes >= (1u << 30)) {
        snprintf(buf, len, "%zu GiB", bytes >> 30);
    } else if (bytes >= (1u << 20)) {
        snprintf(buf, len, "%zu MiB", bytes >> 20);
    } else if (bytes >= 1024) {
        snprintf(buf, len, "%zu KiB", bytes >> 10);
    } else {
        snprintf(buf, len, "%zu B", bytes);
    }
    return buf;
}

/* The matrix of nvidia-smi topo -m: GPU and NIC rows and columns, then affinity. */
static void print_matrix(const topo_t *t)
{
    char label[TOPO_LABEL_LEN], name[16];
    int w = 7;
    printf("\n\t");
    for (int j = 0; j < t->ngpus; ++j) {
        snprintf(name, sizeof(name), "GPU%d", j);
        printf("%-*s", w, name);
    }
    for (int k = 0; k < t->nnics; ++k) {
        snprintf(name, sizeof(name), "NIC%d", k);
        printf("%-*s", w, name);
    }
    printf("%-20s%s\n", "CPU Affinity", "NUMA Affinity");
    for (int i = 0; i < t->ngpus; ++i) {
        const topo_gpu_t *g = &t->gpus[i];
        char numa[16];
        printf("GPU%d\t", i);
        for (int j = 0; j < t->ngpus; ++j) {
            printf("%-*s", w, topo_link_label(&t->links[i][j], label));
        }
        for (int k = 0; k < t->nnics; ++k) {
            printf("%-*s", w, topo_link_class_name(t->gpu_nic[i][k]));
        }
        snprintf(numa, sizeof(numa), "%d", g->numa);
        printf("%-20s%s\n", ('\0' != g->cpus[0]) ? g->cpus : "N/A", (g->numa >= 0) ? numa : "N/A");
    }
    for (int k = 0; k < t->nnics; ++k) {
        printf("NIC%d\t", k);
        for (int j = 0; j < t->ngpus; ++j) {
            printf("%-*s", w, topo_link_class_name(t->gpu_nic[j][k]));
        }
        for (int m = 0; m < t->nnics; ++m) {
            /* NIC-to-NIC paths are not part of the model */
            printf("%-*s", w, (m == k) ? "X" : "-");
        }
        printf("\n");
    }
    printf("\nLegend:\n"
           "  X     = Self\n"
           "  SYS   = PCIe plus the SMP interconnect between NUMA nodes (e.g. QPI/UPI)\n"
           "  PHB   = PCIe through a host bridge (the CPU); nvidia-smi's PHB and NODE\n"
           "  PXB   = PCIe through several PCIe switches, no host bridge\n"
           "  PIX   = PCIe through at most one PCIe switch\n"
           "  NVS#  = NVLink through NVSwitches, # links usable by the pair\n"
           "  NV#   = # NVLinks directly between the GPUs\n"
           "  -     = NIC-to-NIC paths are not modelled\n");
}

/* What the matrix cannot show: identities (UUID, bus id), link speeds, NIC names, sockets. */
static void print_inventory(const topo_t *t)
{
    char uuid[TOPO_UUID_STRLEN], bw[32];
    if (t->ngpus > 0) {
        printf("\nGPUs:\n");
    }
    for (int i = 0; i < t->ngpus; ++i) {
        const topo_gpu_t *g = &t->gpus[i];
        topo_uuid_format(g->uuid, uuid);
        printf("  GPU%d  %s  %s  bus %s", i, ('\0' != g->name[0]) ? g->name : "(unnamed)", uuid,
               g->bus_id);
        if (g->sm > 0) {
            printf("  sm %d.%d", g->sm / 10, g->sm % 10);
        }
        if (g->pcie_gen > 0) {
            printf("  PCIe %dx%d", g->pcie_gen, g->pcie_width);
        }
        if (g->nvswitch_links > 0) {
            printf("  %d NVSwitch links", g->nvswitch_links);
        }
        if (0 != g->nvlink_bw) {
            printf("  %s per NVLink", gbs(g->nvlink_bw, bw, sizeof(bw)));
        }
        printf("\n");
    }
    if (t->nnics > 0) {
        printf("\nNICs:\n");
    }
    for (int k = 0; k < t->nnics; ++k) {
        const topo_nic_t *n = &t->nics[k];
        static const char *const kinds[] = {"InfiniBand", "RoCE", "Ethernet"};
        printf("  NIC%d  %s  %s", k, n->name, ((unsigned) n->kind < 3) ? kinds[n->kind] : "?");
        if ('\0' != n->netdev[0] && 0 != strcmp(n->netdev, n->name)) {
            printf("  netdev %s", n->netdev);
        }
        if ('\0' != n->bus_id[0]) {
            printf("  bus %s", n->bus_id);
        }
        if (n->numa >= 0) {
            printf("  NUMA %d", n->numa);
        }
        if (0 != n->speed) {
            printf("  %g Gb/s", n->speed / 1000.0);
        }
        printf("\n");
    }
    if (t->nnuma > 0) {
        printf("\nNUMA nodes:\n");
    }
    for (int i = 0; i < t->nnuma; ++i) {
        const topo_numa_t *n = &t->numa[i];
        printf("  NUMA %d", n->os_index);
        if (n->package >= 0) {
            printf("  socket %d", n->package);
        }
        printf("  CPUs %s\n", ('\0' != n->cpus[0]) ? n->cpus : "?");
    }
}

/*
 * What coll/gpu would do with this team: its summary and warning, the per-pair peer-access
 * decisions under the chosen level, the ring, chain and binary trees per root, and the
 * allreduce/bcast decision for every power of two from 8 B to 1 GiB.
 */
static void print_team(const topo_t *t, const options_t *o, const int *team, int n)
{
    int ring[1024], parent[1024];
    topo_team_info_t info;
    char bw[32];
    uint32_t slowest = 0;

    printf("\nTeam: %d rank%s on GPUs", n, (1 == n) ? "" : "s");
    for (int i = 0; i < n; ++i) {
        printf("%s%d", i ? "," : " ", team[i]);
    }
    printf("; coll_gpu_p2p_level %s%s\n", topo_p2p_level_name(o->level),
           o->p2p_disable ? ", coll_gpu_p2p_disable" : "");
    if (TOPO_OK != topo_ring(t, team, n, ring, &slowest) ||
        TOPO_OK != topo_team_info(t, team, n, ring, o->level, o->p2p_disable, &info)) {
        printf("  (the team does not fit the model)\n");
        return;
    }
    printf("  links: worst %s, slowest pair %s; peer access: %s\n", info.label,
           gbs(info.slowest_bw, bw, sizeof(bw)),
           info.p2p_all ? "all pairs" : info.p2p_ring ? "ring neighbours only" : "none");
    if ('\0' != info.warning[0]) {
        printf("  WARNING: %s\n", info.warning);
    }

    printf("\nPeer access (GPU pairs):\n\t");
    for (int j = 0; j < t->ngpus; ++j) {
        printf("GPU%-4d", j);
    }
    printf("\n");
    for (int i = 0; i < t->ngpus; ++i) {
        printf("GPU%d\t", i);
        for (int j = 0; j < t->ngpus; ++j) {
            printf("%-7s", (i == j) ? "X"
                           : topo_p2p_allowed(t, i, j, o->level, o->p2p_disable, NULL) ? "OK"
                                                                                      : "no");
        }
        printf("\n");
    }

    printf("\nRing (slowest hop %s):\n  ", gbs(slowest, bw, sizeof(bw)));
    for (int i = 0; i < n; ++i) {
        printf("r%d(GPU%d) -> ", ring[i], team[ring[i]]);
    }
    printf("r%d\n", ring[0]);

    /* every root on small teams; the first few otherwise */
    int nroots = (n <= 8) ? n : 4;
    printf("\nBcast trees (rank: children):\n");
    for (int r = 0; r < nroots; ++r) {
        for (int shape = 0; shape < 2; ++shape) {
            if (TOPO_OK != topo_tree(t, team, n, r, (topo_tree_shape_t) shape, ring, parent)) {
                continue;
            }
            printf("  root %-3d %-6s depth %-2d ", r, shape ? "binary" : "chain",
                   topo_tree_depth(parent, n));
            for (int v = 0; v < n; ++v) {
                int ch[2], k = topo_tree_children(parent, n, v, ch, 2);
                if (1 == k) {
                    printf(" %d:{%d}", v, ch[0]);
                } else if (2 == k) {
                    printf(" %d:{%d,%d}", v, ch[0], ch[1]);
                }
            }
            printf("\n");
        }
    }
    if (nroots < n) {
        printf("  (%d more roots not shown)\n", n - nroots);
    }

    topo_select_in_t in;
    memset(&in, 0, sizeof(in));
    topo_select_in_from_team(&in, &info, o->nodes);
    in.nblocks = o->blocks;
    in.nthreads = o->threads;
    in.chunk_bytes = o->chunk;
    printf("\nAlgorithms (%d rank%s/node, %d node%s, %s):\n", n, (1 == n) ? "" : "s", o->nodes,
           (1 == o->nodes) ? "" : "s", info.label);
    printf("  %-9s %-9s %-9s %-6s %-8s  %-9s %-9s %-6s %-8s\n", "size", "allreduce", "chunk",
           "blocks", "threads", "bcast", "chunk", "blocks", "threads");
    for (size_t bytes = 8; bytes <= ((size_t) 1 << 30); bytes *= 2) {
        topo_plan_t ar, bc;
        char sz[32], c1[32], c2[32];
        in.bytes = bytes;
        in.coll = TOPO_COLL_ALLREDUCE;
        in.forced_alg = o->ar_alg;
        topo_select(&in, &ar);
        in.coll = TOPO_COLL_BCAST;
        in.forced_alg = o->bc_alg;
        topo_select(&in, &bc);
        printf("  %-9s %-9s %-9s %-6d %-8d  %-9s %-9s %-6d %-8d\n",
               size_name(bytes, sz, sizeof(sz)), topo_alg_name(TOPO_COLL_ALLREDUCE, ar.alg),
               ar.chunk_bytes ? size_name(ar.chunk_bytes, c1, sizeof(c1)) : "-", ar.nblocks,
               ar.nthreads, topo_alg_name(TOPO_COLL_BCAST, bc.alg),
               bc.chunk_bytes ? size_name(bc.chunk_bytes, c2, sizeof(c2)) : "-", bc.nblocks,
               bc.nthreads);
        if (o->reasons) {
            printf("      allreduce: %s\n      bcast:     %s\n", ar.reason, bc.reason);
        }
    }
}

/* Load or probe, dump if asked, then report.  Exit 0 also when no GPU is found: that is a
 * finding, not a failure; 1 for an unreadable file, 2 for bad arguments. */
int main(int argc, char **argv)
{
    options_t o;
    topo_t *t = NULL;
    char err[TOPO_ERR_LEN] = "", why[TOPO_TEXT_LEN] = "";
    const topo_gpu_probe_ops_t *ops = NULL;
    int rc;

    if (0 != parse_options(argc, argv, &o)) {
        return 2;
    }
    if (NULL != o.load) {
        rc = topo_load_file(o.load, &t, err, sizeof(err));
        if (TOPO_OK != rc) {
            fprintf(stderr, "coll_gpu_topo: %s\n", err);
            return 1;
        }
    } else {
        topo_probe_opts_t po;
        memset(&po, 0, sizeof(po));
        if (!o.no_cuda) {
            ops = cuda_ops(why, sizeof(why));
        } else {
            snprintf(why, sizeof(why), "left out (--no-cuda)");
        }
        po.gpu_ops = ops;
        po.no_nvml = o.no_nvml;
        po.no_hwloc = o.no_hwloc;
        po.log = o.verbose ? log_to_stderr : NULL;
        rc = topo_probe(&po, &t);
        if (TOPO_OK != rc) {
            fprintf(stderr, "coll_gpu_topo: probe failed (%d)\n", rc);
            return 1;
        }
    }

    /* with --dump - standard output carries the model only, so the report is left out */
    FILE *info_out = (NULL != o.dump && 0 == strcmp(o.dump, "-")) ? stderr : stdout;
    if (NULL != o.dump) {
        rc = (0 == strcmp(o.dump, "-")) ? topo_dump(t, stdout)
                                        : topo_dump_file(t, o.dump, err, sizeof(err));
        if (TOPO_OK != rc) {
            fprintf(stderr, "coll_gpu_topo: %s\n", ('\0' != err[0]) ? err : "dump failed");
            topo_free(t);
            return 1;
        }
        if (0 != strcmp(o.dump, "-") && !o.quiet) {
            printf("Model written to %s\n", o.dump);
        }
    }
    if (o.quiet || info_out != stdout) {
        topo_free(t);
        return 0;
    }

    printf("coll/gpu node model of %s\n", ('\0' != t->host[0]) ? t->host : "(unknown host)");
    printf("  %s: %s\n", (NULL != o.load) ? o.load : "probed", t->source);
    if (NULL == o.load && NULL == ops && '\0' != why[0]) {
        printf("  CUDA: %s\n", why);
    }
    if (0 == t->ngpus && NULL != o.load) {
        printf("\nThe file describes no GPU: nothing to search.\n");
    } else if (0 == t->ngpus) {
        printf("\nNo GPU found: %s.\nWhat hwloc sees of this node follows; nothing to search.\n",
               ('\0' != why[0]) ? why : "the driver reports no device");
    }
    print_matrix(t);
    print_inventory(t);

    if (t->ngpus > 0) {
        int team[1024], n;
        if (o.nteam > 0) {
            n = o.nteam;
            memcpy(team, o.team, sizeof(int) * (size_t) n);
        } else {
            n = (o.ranks_per_node > 0) ? o.ranks_per_node : t->ngpus;
            for (int i = 0; i < n; ++i) {
                team[i] = i % t->ngpus;
            }
        }
        for (int i = 0; i < n; ++i) {
            if (team[i] >= t->ngpus) {
                fprintf(stderr, "coll_gpu_topo: GPU %d is not in the model (%d GPUs)\n", team[i],
                        t->ngpus);
                topo_free(t);
                return 2;
            }
        }
        print_team(t, &o, team, n);
    }
    topo_free(t);
    return 0;
}
