/*
 * topo_probe.c - build the model of this node from NVML, CUDA and hwloc.
 *
 * Serves the component's lazy team setup (the first device-buffer collective on a
 * communicator) when coll_gpu_topo_file is not set, and the coll_gpu_topo tool.
 *
 *   NVML   loaded at run time (dlopen "libnvidia-ml.so.1", our own prototypes below, so
 *          neither the build nor a machine without the driver needs nvml.h): every GPU of the
 *          node with UUID, PCI bus id, name, compute capability, PCIe link; per NVLink its
 *          state and remote end (GPU by bus id, or NVSwitch); PCIe common ancestor and P2P
 *          status per pair.
 *   CUDA   through callbacks the caller passes (topo_gpu_probe_ops_t: the component hands in
 *          the device layer's functions, the tool its own dlopen of libcuda), so this library
 *          links no CUDA: the GPUs this process sees, peer access, P2P performance rank,
 *          native atomics.
 *   hwloc  NUMA nodes and their CPUs; the NUMA node and CPU set near each GPU by PCI bus id;
 *          NICs (verbs devices: InfiniBand or RoCE by link layer; plain Ethernet interfaces)
 *          and the PCIe path class between each GPU and NIC, and between GPUs when NVML is
 *          missing.
 *
 * Any source may be missing: the model then holds what the others gave, topo->source says
 * which were used, and the log callback gets one line per source.  Nothing here aborts.
 */
#include "topo.h"

#include <ctype.h>
#include <dlfcn.h>
#include <hwloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the few NVML declarations we use (layouts of nvml.h, API v2/v3 entry points) ------- */

typedef int nvml_return_t; /* NVML_SUCCESS == 0 */
typedef struct nvml_device_st *nvml_device_t;

/* nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3 / nvmlDeviceGetNvLinkRemotePciInfo_v2 */
typedef struct {
    char bus_id_legacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;
    unsigned int pci_subsystem_id;
    char bus_id[32];
} nvml_pci_info_t;

#define NVML_SUCCESS 0
#define NVML_FEATURE_ENABLED 1
#define NVML_NVLINK_DEVICE_TYPE_GPU 0
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 2
#define NVML_TOPOLOGY_INTERNAL 0
#define NVML_TOPOLOGY_SINGLE 10
#define NVML_TOPOLOGY_MULTIPLE 20
#define NVML_TOPOLOGY_HOSTBRIDGE 30
#define NVML_TOPOLOGY_NODE 40
#define NVML_P2P_CAPS_INDEX_READ 0
#define NVML_P2P_CAPS_INDEX_WRITE 1
#define NVML_P2P_CAPS_INDEX_ATOMICS 3
#define NVML_P2P_STATUS_OK 0
#define NVML_LINKS_TO_TRY 32 /* beyond NVML_NVLINK_MAX_LINKS (18 today); errors are skipped */

typedef struct {
    void *lib;
    nvml_return_t (*init)(void);
    nvml_return_t (*shutdown)(void);
    const char *(*error_string)(nvml_return_t);
    nvml_return_t (*driver_version)(char *, unsigned int);
    nvml_return_t (*count)(unsigned int *);
    nvml_return_t (*handle)(unsigned int, nvml_device_t *);
    nvml_return_t (*uuid)(nvml_device_t, char *, unsigned int);
    nvml_return_t (*name)(nvml_device_t, char *, unsigned int);
    nvml_return_t (*pci)(nvml_device_t, nvml_pci_info_t *);
    nvml_return_t (*cc)(nvml_device_t, int *, int *);
    nvml_return_t (*pcie_gen)(nvml_device_t, unsigned int *);
    nvml_return_t (*pcie_width)(nvml_device_t, unsigned int *);
    nvml_return_t (*nvl_state)(nvml_device_t, unsigned int, int *);
    nvml_return_t (*nvl_remote_pci)(nvml_device_t, unsigned int, nvml_pci_info_t *);
    nvml_return_t (*nvl_remote_type)(nvml_device_t, unsigned int, int *);
    nvml_return_t (*common_ancestor)(nvml_device_t, nvml_device_t, int *);
    nvml_return_t (*p2p_status)(nvml_device_t, nvml_device_t, int, int *);
} nvml_api_t;

/* ---- probe state ------------------------------------------------------------------------ */

/* One GPU while probing: the model entry plus where each source knows it from. */
typedef struct {
    topo_gpu_t g;
    nvml_device_t nvml;  /* NULL: NVML does not know it */
    int ordinal;         /* CUDA ordinal in this process, -1: not visible */
    int nremote;         /* active NVLinks to another GPU */
    char remote[NVML_LINKS_TO_TRY][TOPO_BUSID_LEN];
    hwloc_obj_t pcidev;  /* hwloc's PCI object, NULL when hwloc does not see it */
} probe_gpu_t;

typedef struct {
    const topo_probe_opts_t *opts;
    topo_t *topo;
    probe_gpu_t *gpus;
    int ngpus;
    nvml_api_t nvml;
    bool have_nvml;
    hwloc_topology_t hw;
    bool have_hwloc;
    hwloc_obj_t nic_pcidev[TOPO_MAX_NICS];
} probe_t;

static void plog(probe_t *p, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void plog(probe_t *p, int level, const char *fmt, ...)
{
    char msg[TOPO_TEXT_LEN];
    va_list ap;
    if (NULL == p->opts || NULL == p->opts->log) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    p->opts->log(p->opts->log_ctx, level, msg);
}

static void source_add(probe_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void source_add(probe_t *p, const char *fmt, ...)
{
    char *s = p->topo->source;
    size_t used = strlen(s);
    va_list ap;
    /* "probe: NVML ...; CUDA ...; hwloc ..." */
    if (used > 0 && ':' != s[used - 1] && used + 2 < sizeof(p->topo->source)) {
        memcpy(s + used, "; ", 3);
        used += 2;
    } else if (used > 0 && used + 1 < sizeof(p->topo->source)) {
        memcpy(s + used, " ", 2);
        used += 1;
    }
    if (used + 1 >= sizeof(p->topo->source)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(s + used, sizeof(p->topo->source) - used, fmt, ap);
    va_end(ap);
}

/* Names go into the text format: printable, no double quotes; words without blanks. */
static void clean_text(char *s, bool word)
{
    for (; '\0' != *s; ++s) {
        if (word && (!isgraph((unsigned char) *s) || '"' == *s || '#' == *s || '=' == *s)) {
            *s = '_';
        } else if ('"' == *s) {
            *s = '\'';
        } else if (!isprint((unsigned char) *s)) {
            *s = ' ';
        }
    }
}

/* ---- NVML ------------------------------------------------------------------------------- */

static bool nvml_open(probe_t *p)
{
    const char *path = (NULL != p->opts->nvml_library) ? p->opts->nvml_library
                                                       : "libnvidia-ml.so.1";
    nvml_api_t *n = &p->nvml;
    n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (NULL == n->lib) {
        const char *e = dlerror();
        source_add(p, "NVML not available (%s)", (NULL != e) ? e : path);
        plog(p, TOPO_LOG_INFO, "topo: NVML not available (%s): NVLinks are unknown; GPUs come "
             "from CUDA, PCIe paths from hwloc", (NULL != e) ? e : path);
        return false;
    }
#define SYM(field, name) (*(void **) &n->field = dlsym(n->lib, name))
    SYM(init, "nvmlInit_v2");
    SYM(shutdown, "nvmlShutdown");
    SYM(error_string, "nvmlErrorString");
    SYM(driver_version, "nvmlSystemGetDriverVersion");
    SYM(count, "nvmlDeviceGetCount_v2");
    SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
    SYM(uuid, "nvmlDeviceGetUUID");
    SYM(name, "nvmlDeviceGetName");
    SYM(pci, "nvmlDeviceGetPciInfo_v3");
    SYM(cc, "nvmlDeviceGetCudaComputeCapability");
    SYM(pcie_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
    SYM(pcie_width, "nvmlDeviceGetMaxPcieLinkWidth");
    SYM(nvl_state, "nvmlDeviceGetNvLinkState");
    SYM(nvl_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    SYM(nvl_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    SYM(common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
    SYM(p2p_status, "nvmlDeviceGetP2PStatus");
#undef SYM
    /* the identity of a GPU is essential; the rest is used where present */
    if (NULL == n->init || NULL == n->shutdown || NULL == n->count || NULL == n->handle ||
        NULL == n->uuid || NULL == n->pci) {
        source_add(p, "NVML too old (missing v2/v3 entry points)");
        plog(p, TOPO_LOG_WARN, "topo: %s lacks nvmlInit_v2/nvmlDeviceGetPciInfo_v3: not used",
             path);
        dlclose(n->lib);
        n->lib = NULL;
        return false;
    }
    nvml_return_t rc = n->init();
    if (NVML_SUCCESS != rc) {
        const char *e = (NULL != n->error_string) ? n->error_string(rc) : "?";
        source_add(p, "NVML init failed (%s)", e);
        plog(p, TOPO_LOG_WARN, "topo: nvmlInit failed (%s): NVLinks are unknown", e);
        dlclose(n->lib);
        n->lib = NULL;
        return false;
    }
    return true;
}

static void nvml_close(probe_t *p)
{
    if (NULL != p->nvml.lib) {
        p->nvml.shutdown();
        dlclose(p->nvml.lib);
        p->nvml.lib = NULL;
    }
}

static probe_gpu_t *add_gpu(probe_t *p)
{
    if (TOPO_MAX_GPUS == p->ngpus) {
        return NULL;
    }
    probe_gpu_t *pg = &p->gpus[p->ngpus++];
    memset(pg, 0, sizeof(*pg));
    pg->g.numa = -1;
    pg->ordinal = -1;
    return pg;
}

static void nvml_gpus(probe_t *p)
{
    nvml_api_t *n = &p->nvml;
    unsigned int count = 0;
    char version[96] = "";
    if (NVML_SUCCESS != n->count(&count)) {
        source_add(p, "NVML: device count failed");
        return;
    }
    if (NULL != n->driver_version) {
        n->driver_version(version, sizeof(version));
        clean_text(version, true);
    }
    for (unsigned int i = 0; i < count; ++i) {
        nvml_device_t dev;
        nvml_pci_info_t pci;
        char uuid[96];
        probe_gpu_t *pg;
        if (NVML_SUCCESS != n->handle(i, &dev) || NVML_SUCCESS != n->uuid(dev, uuid, sizeof(uuid)) ||
            NVML_SUCCESS != n->pci(dev, &pci)) {
            plog(p, TOPO_LOG_WARN, "topo: NVML device %u: no handle, UUID or PCI info; skipped", i);
            continue;
        }
        pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
        pg = add_gpu(p);
        if (NULL == pg) {
            plog(p, TOPO_LOG_WARN, "topo: more than %d GPUs; the rest are left out",
                 TOPO_MAX_GPUS);
            break;
        }
        if (TOPO_OK != topo_uuid_parse(uuid, pg->g.uuid) ||
            TOPO_OK != topo_bus_id_normalize(pci.bus_id, pg->g.bus_id, sizeof(pg->g.bus_id))) {
            plog(p, TOPO_LOG_WARN, "topo: NVML device %u: unreadable UUID '%s' or bus id '%s'",
                 i, uuid, pci.bus_id);
            p->ngpus--;
            continue;
        }
        pg->nvml = dev;
        if (NULL != n->name && NVML_SUCCESS == n->name(dev, pg->g.name, sizeof(pg->g.name))) {
            clean_text(pg->g.name, false);
        }
        int major = 0, minor = 0;
        if (NULL != n->cc && NVML_SUCCESS == n->cc(dev, &major, &minor)) {
            pg->g.sm = major * 10 + minor;
        }
        unsigned int gen = 0, width = 0;
        if (NULL != n->pcie_gen && NULL != n->pcie_width &&
            NVML_SUCCESS == n->pcie_gen(dev, &gen) && NVML_SUCCESS == n->pcie_width(dev, &width)) {
            pg->g.pcie_gen = (int) gen;
            pg->g.pcie_width = (int) width;
        }
        /* NVLinks: count those to NVSwitches, remember the far end of those to GPUs */
        for (unsigned int l = 0; NULL != n->nvl_state && l < NVML_LINKS_TO_TRY; ++l) {
            int active = 0, type = -1;
            nvml_pci_info_t remote;
            if (NVML_SUCCESS != n->nvl_state(dev, l, &active) || NVML_FEATURE_ENABLED != active) {
                continue;
            }
            if (NULL != n->nvl_remote_type && NVML_SUCCESS == n->nvl_remote_type(dev, l, &type) &&
                NVML_NVLINK_DEVICE_TYPE_SWITCH == type) {
                pg->g.nvswitch_links++;
                continue;
            }
            /* older drivers lack the remote type: a remote bus id that is a GPU decides */
            if (NULL != n->nvl_remote_pci && NVML_SUCCESS == n->nvl_remote_pci(dev, l, &remote)) {
                remote.bus_id[sizeof(remote.bus_id) - 1] = '\0';
                if (TOPO_OK == topo_bus_id_normalize(remote.bus_id, pg->remote[pg->nremote],
                                                     TOPO_BUSID_LEN)) {
                    pg->nremote++;
                }
            }
        }
        if (pg->g.nvswitch_links > 0 || pg->nremote > 0) {
            pg->g.nvlink_bw = topo_nvlink_bw_for_sm(pg->g.sm);
        }
    }
    p->have_nvml = true;
    source_add(p, "NVML %s: %d GPUs", ('\0' != version[0]) ? version : "(driver ?)", p->ngpus);
    plog(p, TOPO_LOG_INFO, "topo: NVML (driver %s) sees %d GPUs", version, p->ngpus);
}

/* NVML's PCIe common ancestor -> our class; -1 when NVML cannot say. */
static int nvml_pcie_class(probe_t *p, probe_gpu_t *a, probe_gpu_t *b)
{
    int level;
    if (NULL == a->nvml || NULL == b->nvml || NULL == p->nvml.common_ancestor ||
        NVML_SUCCESS != p->nvml.common_ancestor(a->nvml, b->nvml, &level)) {
        return -1;
    }
    if (level <= NVML_TOPOLOGY_SINGLE) {
        return TOPO_LINK_PIX; /* INTERNAL (two GPUs on one board) counts as one switch */
    }
    if (level <= NVML_TOPOLOGY_MULTIPLE) {
        return TOPO_LINK_PXB;
    }
    if (level <= NVML_TOPOLOGY_NODE) {
        return TOPO_LINK_PHB; /* HOSTBRIDGE and NODE: through the CPU, one NUMA node */
    }
    return TOPO_LINK_SYS;
}

static int8_t nvml_p2p(probe_t *p, probe_gpu_t *a, probe_gpu_t *b, int index)
{
    int status;
    if (NULL == a->nvml || NULL == b->nvml || NULL == p->nvml.p2p_status ||
        NVML_SUCCESS != p->nvml.p2p_status(a->nvml, b->nvml, index, &status)) {
        return -1;
    }
    return (NVML_P2P_STATUS_OK == status) ? 1 : 0;
}

/* ---- CUDA through the caller's callbacks ------------------------------------------------ */

static void cuda_gpus(probe_t *p)
{
    const topo_gpu_probe_ops_t *ops = p->opts->gpu_ops;
    int count = 0, added = 0, rc;
    if (NULL == ops) {
        source_add(p, "CUDA: not asked");
        return;
    }
    if (NULL == ops->device_count || NULL == ops->device_uuid || NULL == ops->device_pci_bus_id) {
        source_add(p, "CUDA: incomplete callbacks");
        plog(p, TOPO_LOG_WARN, "topo: the CUDA probe callbacks lack device_count, device_uuid "
             "or device_pci_bus_id: not used");
        return;
    }
    rc = ops->device_count(&count);
    if (0 != rc || count <= 0) {
        source_add(p, "CUDA: no device (%s)", (0 != rc) ? "no driver or device count failed"
                                                         : "0 devices");
        plog(p, TOPO_LOG_INFO, "topo: CUDA reports no device (status %d, count %d)", rc, count);
        return;
    }
    for (int d = 0; d < count; ++d) {
        uint8_t uuid[TOPO_UUID_BYTES];
        char bus[64], norm[TOPO_BUSID_LEN];
        probe_gpu_t *pg = NULL;
        if (0 != ops->device_uuid(d, uuid) || 0 != ops->device_pci_bus_id(d, bus, sizeof(bus))) {
            plog(p, TOPO_LOG_WARN, "topo: CUDA device %d: no UUID or PCI bus id; skipped", d);
            continue;
        }
        bus[sizeof(bus) - 1] = '\0';
        if (TOPO_OK != topo_bus_id_normalize(bus, norm, sizeof(norm))) {
            plog(p, TOPO_LOG_WARN, "topo: CUDA device %d: unreadable bus id '%s'", d, bus);
            continue;
        }
        for (int i = 0; i < p->ngpus && NULL == pg; ++i) {
            if (0 == memcmp(p->gpus[i].g.uuid, uuid, TOPO_UUID_BYTES)) {
                pg = &p->gpus[i];
            }
        }
        if (NULL == pg) {
            /* not known to NVML (no NVML, or a device it does not list): CUDA's view it is */
            pg = add_gpu(p);
            if (NULL == pg) {
                break;
            }
            memcpy(pg->g.uuid, uuid, TOPO_UUID_BYTES);
            snprintf(pg->g.bus_id, sizeof(pg->g.bus_id), "%s", norm);
            ++added;
        }
        pg->ordinal = d;
        if ('\0' == pg->g.name[0] && NULL != ops->device_name &&
            0 == ops->device_name(d, pg->g.name, sizeof(pg->g.name))) {
            pg->g.name[sizeof(pg->g.name) - 1] = '\0';
            clean_text(pg->g.name, false);
        }
        int major = 0, minor = 0;
        if (0 == pg->g.sm && NULL != ops->device_sm && 0 == ops->device_sm(d, &major, &minor)) {
            pg->g.sm = major * 10 + minor;
        }
    }
    source_add(p, "CUDA: %d devices visible%s", count,
               (p->have_nvml && added > 0) ? " (some unknown to NVML)" : "");
    if (p->have_nvml) {
        plog(p, TOPO_LOG_INFO, "topo: CUDA sees %d devices (%d not listed by NVML)", count, added);
    } else {
        plog(p, TOPO_LOG_INFO, "topo: CUDA sees %d devices", count);
    }
}

/* CUDA's answer for a pair of visible GPUs; -1 when a GPU is not visible or no callback. */
static int8_t cuda_peer(probe_t *p, probe_gpu_t *a, probe_gpu_t *b)
{
    const topo_gpu_probe_ops_t *ops = p->opts->gpu_ops;
    bool ab = false, ba = false;
    if (NULL == ops || NULL == ops->device_can_access_peer || a->ordinal < 0 || b->ordinal < 0) {
        return -1;
    }
    if (0 != ops->device_can_access_peer(a->ordinal, b->ordinal, &ab) ||
        0 != ops->device_can_access_peer(b->ordinal, a->ordinal, &ba)) {
        return -1;
    }
    return (ab && ba) ? 1 : 0;
}

static int cuda_attr(probe_t *p, probe_gpu_t *a, probe_gpu_t *b, topo_p2p_attr_t attr)
{
    const topo_gpu_probe_ops_t *ops = p->opts->gpu_ops;
    int v = -1;
    if (NULL == ops || NULL == ops->device_p2p_attr || a->ordinal < 0 || b->ordinal < 0 ||
        0 != ops->device_p2p_attr(a->ordinal, b->ordinal, attr, &v)) {
        return -1;
    }
    return v;
}

/* ---- hwloc ------------------------------------------------------------------------------ */

static bool hwloc_open(probe_t *p)
{
    if (0 != hwloc_topology_init(&p->hw)) {
        source_add(p, "hwloc: init failed");
        return false;
    }
    /* PCI devices and OS devices (NICs) are filtered out by default */
    hwloc_topology_set_io_types_filter(p->hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (0 != hwloc_topology_load(p->hw)) {
        hwloc_topology_destroy(p->hw);
        source_add(p, "hwloc: load failed");
        plog(p, TOPO_LOG_WARN, "topo: hwloc could not load the topology: no NUMA, NIC or "
             "PCIe information");
        return false;
    }
    p->have_hwloc = true;
    return true;
}

static void cpus_of(hwloc_const_bitmap_t set, char *out, size_t len)
{
    /* a list cut short would be a wrong list: leave it unknown instead */
    if (NULL == set || hwloc_bitmap_list_snprintf(out, len, set) >= (int) len) {
        out[0] = '\0';
    }
}

/* OS index of the one NUMA node under a locality object, or -1 (none or several). */
static int numa_of(hwloc_obj_t obj)
{
    if (NULL == obj || NULL == obj->nodeset || 1 != hwloc_bitmap_weight(obj->nodeset)) {
        return -1;
    }
    return hwloc_bitmap_first(obj->nodeset);
}

static void hwloc_numa(probe_t *p)
{
    topo_t *t = p->topo;
    hwloc_obj_t obj = NULL;
    while (NULL != (obj = hwloc_get_next_obj_by_type(p->hw, HWLOC_OBJ_NUMANODE, obj)) &&
           t->nnuma < TOPO_MAX_NUMA) {
        topo_numa_t *n = &t->numa[t->nnuma++];
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(p->hw, HWLOC_OBJ_PACKAGE, obj);
        n->os_index = (int) obj->os_index;
        n->package = (NULL != pkg) ? (int) pkg->os_index : -1;
        cpus_of(obj->cpuset, n->cpus, sizeof(n->cpus));
    }
}

static hwloc_obj_t pcidev_by_bus(probe_t *p, const char *bus_id)
{
    unsigned domain, bus, dev, fn;
    if (!p->have_hwloc || 4 != sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn)) {
        return NULL;
    }
    return hwloc_get_pcidev_by_busid(p->hw, domain, bus, dev, fn);
}

/*
 * The PCIe class between two PCI objects from hwloc's tree.  hwloc's own common-ancestor
 * helper compares depths, which I/O objects do not have, so walk the parent chains instead.
 *   common ancestor a PCI switch port, at most one switch on each side   -> PIX
 *   common ancestor a PCI switch port, more switches below it            -> PXB
 *   common ancestor a host bridge                                        -> PHB
 *   common ancestor a CPU-side object; both near the same NUMA node(s)   -> PHB
 *   otherwise                                                            -> SYS
 */
static topo_link_class_t hwloc_pci_class(hwloc_obj_t a, hwloc_obj_t b)
{
    hwloc_obj_t anc = NULL;
    int bridges_a = 0, bridges_b = 0;
    if (NULL == a || NULL == b) {
        return TOPO_LINK_SYS;
    }
    for (hwloc_obj_t x = a; NULL != x && NULL == anc; x = x->parent) {
        for (hwloc_obj_t y = b; NULL != y; y = y->parent) {
            if (x == y) {
                anc = x;
                break;
            }
        }
    }
    if (NULL == anc) {
        return TOPO_LINK_SYS;
    }
    if (hwloc_obj_type_is_io(anc->type)) {
        if (HWLOC_OBJ_BRIDGE == anc->type &&
            HWLOC_OBJ_BRIDGE_HOST == anc->attr->bridge.upstream_type) {
            return TOPO_LINK_PHB;
        }
        for (hwloc_obj_t x = a->parent; NULL != x && x != anc; x = x->parent) {
            bridges_a += (HWLOC_OBJ_BRIDGE == x->type);
        }
        for (hwloc_obj_t y = b->parent; NULL != y && y != anc; y = y->parent) {
            bridges_b += (HWLOC_OBJ_BRIDGE == y->type);
        }
        /* one switch = its downstream port below the common upstream port */
        return (bridges_a <= 1 && bridges_b <= 1) ? TOPO_LINK_PIX : TOPO_LINK_PXB;
    }
    hwloc_obj_t la = a, lb = b;
    while (NULL != la && hwloc_obj_type_is_io(la->type)) {
        la = la->parent;
    }
    while (NULL != lb && hwloc_obj_type_is_io(lb->type)) {
        lb = lb->parent;
    }
    if (NULL != la && NULL != lb && NULL != la->nodeset && NULL != lb->nodeset &&
        hwloc_bitmap_intersects(la->nodeset, lb->nodeset)) {
        return TOPO_LINK_PHB;
    }
    return TOPO_LINK_SYS;
}

static hwloc_obj_t locality(hwloc_obj_t obj)
{
    while (NULL != obj && hwloc_obj_type_is_io(obj->type)) {
        obj = obj->parent;
    }
    return obj;
}

static void hwloc_gpu_places(probe_t *p)
{
    int seen = 0;
    for (int i = 0; i < p->ngpus; ++i) {
        probe_gpu_t *pg = &p->gpus[i];
        hwloc_obj_t loc;
        pg->pcidev = pcidev_by_bus(p, pg->g.bus_id);
        if (NULL == pg->pcidev) {
            continue;
        }
        ++seen;
        loc = locality(pg->pcidev);
        if (NULL != loc) {
            cpus_of(loc->cpuset, pg->g.cpus, sizeof(pg->g.cpus));
            pg->g.numa = numa_of(loc);
        }
    }
    if (p->ngpus > 0 && seen < p->ngpus) {
        plog(p, TOPO_LOG_INFO, "topo: hwloc sees %d of %d GPUs on PCI (containers may hide "
             "the PCI tree): CPU/NUMA affinity unknown for the others", seen, p->ngpus);
    }
}

/* First number of a sysfs file, scaled; 0 when absent or not positive. */
static uint32_t sysfs_number(const char *path, double scale)
{
    FILE *f = fopen(path, "r");
    double v = 0;
    if (NULL == f) {
        return 0;
    }
    if (1 != fscanf(f, "%lf", &v)) {
        v = 0;
    }
    fclose(f);
    return (v > 0 && v * scale < 4.0e9) ? (uint32_t) (v * scale + 0.5) : 0;
}

static void hwloc_nics(probe_t *p)
{
    topo_t *t = p->topo;
    hwloc_obj_t os = NULL;
    char path[512];
    /* verbs devices first (they name InfiniBand and RoCE ports), then plain Ethernet */
    for (int pass = 0; pass < 2; ++pass) {
        os = NULL;
        while (NULL != (os = hwloc_get_next_osdev(p->hw, os)) && t->nnics < TOPO_MAX_NICS) {
            hwloc_obj_t pci = os->parent;
            topo_nic_t *n;
            bool verbs = (HWLOC_OBJ_OSDEV_OPENFABRICS == os->attr->osdev.type);
            if (NULL == pci || HWLOC_OBJ_PCI_DEVICE != pci->type || NULL == os->name ||
                (0 == pass) != verbs ||
                (!verbs && HWLOC_OBJ_OSDEV_NETWORK != os->attr->osdev.type)) {
                continue; /* virtual interfaces have no PCI parent */
            }
            if (!verbs) {
                /* an interface of a verbs device is that NIC's netdev, not a NIC of its own */
                bool taken = false;
                for (int k = 0; k < t->nnics && !taken; ++k) {
                    taken = (p->nic_pcidev[k] == pci);
                }
                if (taken) {
                    continue;
                }
            }
            n = &t->nics[t->nnics];
            memset(n, 0, sizeof(*n));
            snprintf(n->name, sizeof(n->name), "%s", os->name);
            clean_text(n->name, true);
            snprintf(n->bus_id, sizeof(n->bus_id), "%04x:%02x:%02x.%x", pci->attr->pcidev.domain,
                     pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
            n->numa = numa_of(locality(pci));
            if (verbs) {
                const char *ll = hwloc_obj_get_info_by_name(os, "Port1LinkLayer");
                n->kind = (NULL != ll && 0 == strcmp(ll, "Ethernet")) ? TOPO_NIC_ROCE : TOPO_NIC_IB;
                for (hwloc_obj_t c = pci->io_first_child; NULL != c; c = c->next_sibling) {
                    if (HWLOC_OBJ_OS_DEVICE == c->type && NULL != c->name &&
                        HWLOC_OBJ_OSDEV_NETWORK == c->attr->osdev.type) {
                        snprintf(n->netdev, sizeof(n->netdev), "%s", c->name);
                        clean_text(n->netdev, true);
                        break;
                    }
                }
                /* "400 Gb/sec (4X NDR)" */
                snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/rate", os->name);
                n->speed = sysfs_number(path, 1000.0);
            } else {
                n->kind = TOPO_NIC_ETH;
                memcpy(n->netdev, n->name, sizeof(n->netdev)); /* same size, NUL-terminated */
                snprintf(path, sizeof(path), "/sys/class/net/%s/speed", os->name);
                n->speed = sysfs_number(path, 1.0); /* Mb/s already */
            }
            p->nic_pcidev[t->nnics++] = pci;
        }
    }
}

/* Cheap sanity hint for the tool: NVIDIA PCI functions hwloc sees (class 03xx, vendor 10de). */
static int hwloc_nvidia_pci_count(probe_t *p)
{
    int k = 0;
    hwloc_obj_t obj = NULL;
    while (p->have_hwloc && NULL != (obj = hwloc_get_next_pcidev(p->hw, obj))) {
        k += (0x10de == obj->attr->pcidev.vendor_id && 0x03 == (obj->attr->pcidev.class_id >> 8));
    }
    return k;
}

/* ---- assembly --------------------------------------------------------------------------- */

static int cmp_gpu_bus(const void *a, const void *b)
{
    return strcmp(((const probe_gpu_t *) a)->g.bus_id, ((const probe_gpu_t *) b)->g.bus_id);
}

static void build_links(probe_t *p)
{
    topo_t *t = p->topo;
    int unknown_paths = 0;
    for (int a = 0; a < p->ngpus; ++a) {
        for (int b = a + 1; b < p->ngpus; ++b) {
            probe_gpu_t *ga = &p->gpus[a], *gb = &p->gpus[b];
            topo_link_t *l = &t->links[a][b];
            int nvl = 0, cls;
            for (int k = 0; k < ga->nremote; ++k) {
                nvl += (0 == strcmp(ga->remote[k], gb->g.bus_id));
            }
            if (nvl > 0) {
                cls = TOPO_LINK_NVL;
            } else if (ga->g.nvswitch_links > 0 && gb->g.nvswitch_links > 0) {
                cls = TOPO_LINK_NVS;
            } else {
                cls = nvml_pcie_class(p, ga, gb);
                if (cls < 0 && NULL != ga->pcidev && NULL != gb->pcidev) {
                    cls = hwloc_pci_class(ga->pcidev, gb->pcidev);
                }
                if (cls < 0) {
                    cls = TOPO_LINK_SYS; /* nothing knows: assume the worst */
                    ++unknown_paths;
                }
            }
            topo_set_link(t, a, b, (topo_link_class_t) cls, nvl, 0);
            /* the driver's word on peer access: CUDA when both are visible, else NVML */
            int8_t p2p = cuda_peer(p, ga, gb);
            if (p2p < 0) {
                int8_t r = nvml_p2p(p, ga, gb, NVML_P2P_CAPS_INDEX_READ);
                int8_t w = nvml_p2p(p, ga, gb, NVML_P2P_CAPS_INDEX_WRITE);
                p2p = (r < 0 || w < 0) ? -1 : (int8_t) (r && w);
            }
            int atom = cuda_attr(p, ga, gb, TOPO_P2P_ATTR_NATIVE_ATOMICS);
            if (atom < 0) {
                atom = nvml_p2p(p, ga, gb, NVML_P2P_CAPS_INDEX_ATOMICS);
            }
            int rank = cuda_attr(p, ga, gb, TOPO_P2P_ATTR_PERF_RANK);
            l->p2p = t->links[b][a].p2p = p2p;
            l->atomics = t->links[b][a].atomics = (int8_t) ((atom < 0) ? -1 : (atom > 0));
            l->perf_rank = t->links[b][a].perf_rank = (int8_t) ((rank < 0 || rank > 127) ? -1 : rank);
        }
        for (int k = 0; k < t->nnics; ++k) {
            t->gpu_nic[a][k] = hwloc_pci_class(p->gpus[a].pcidev, p->nic_pcidev[k]);
        }
    }
    if (unknown_paths > 0) {
        plog(p, TOPO_LOG_WARN, "topo: the path between %d GPU pairs is unknown (no NVML, and "
             "hwloc does not see the GPUs on PCI): assumed SYS", unknown_paths);
    }
}

int topo_probe(const topo_probe_opts_t *opts, topo_t **out)
{
    static const topo_probe_opts_t no_opts;
    probe_t p;
    if (NULL == out) {
        return TOPO_ERR_ARG;
    }
    *out = NULL;
    memset(&p, 0, sizeof(p));
    p.opts = (NULL != opts) ? opts : &no_opts;
    p.topo = topo_new();
    p.gpus = calloc(TOPO_MAX_GPUS, sizeof(*p.gpus));
    if (NULL == p.topo || NULL == p.gpus) {
        topo_free(p.topo);
        free(p.gpus);
        return TOPO_ERR_NOMEM;
    }
    if (0 == gethostname(p.topo->host, sizeof(p.topo->host) - 1)) {
        clean_text(p.topo->host, true);
    }
    source_add(&p, "probe:");

    if (!p.opts->no_nvml && nvml_open(&p)) {
        nvml_gpus(&p);
    } else if (p.opts->no_nvml) {
        source_add(&p, "NVML not asked");
    }
    cuda_gpus(&p);
    qsort(p.gpus, (size_t) p.ngpus, sizeof(*p.gpus), cmp_gpu_bus);

    if (!p.opts->no_hwloc && hwloc_open(&p)) {
        /* the release is in the root's info; the API version is only a fallback */
        const char *rel = hwloc_obj_get_info_by_name(hwloc_get_root_obj(p.hw), "hwlocVersion");
        char ver[32];
        unsigned v = hwloc_get_api_version();
        if (NULL != rel) {
            snprintf(ver, sizeof(ver), "%s", rel);
        } else {
            snprintf(ver, sizeof(ver), "API %u.%u", v >> 16, (v >> 8) & 0xff);
        }
        hwloc_numa(&p);
        hwloc_gpu_places(&p);
        hwloc_nics(&p);
        source_add(&p, "hwloc %s: %d NUMA nodes, %d NICs", ver, p.topo->nnuma, p.topo->nnics);
        plog(&p, TOPO_LOG_INFO, "topo: hwloc %s: %d NUMA nodes, %d NICs", ver, p.topo->nnuma,
             p.topo->nnics);
        if (0 == p.ngpus) {
            int nv = hwloc_nvidia_pci_count(&p);
            if (nv > 0) {
                source_add(&p, "hwloc sees %d NVIDIA GPUs on PCI but no driver answered", nv);
            }
        }
    } else if (p.opts->no_hwloc) {
        source_add(&p, "hwloc not asked");
    }

    p.topo->ngpus = p.ngpus;
    for (int i = 0; i < p.ngpus; ++i) {
        p.topo->gpus[i] = p.gpus[i].g;
    }
    build_links(&p);
    if (0 == p.ngpus) {
        source_add(&p, "no GPU found");
        plog(&p, TOPO_LOG_INFO, "topo: no GPU found (no driver, no device, or none visible)");
    }

    clean_text(p.topo->source, false);
    nvml_close(&p);
    if (p.have_hwloc) {
        hwloc_topology_destroy(p.hw);
    }
    free(p.gpus);
    *out = p.topo;
    return TOPO_OK;
}
