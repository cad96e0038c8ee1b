/*
 * topo_model.c - the node model itself: creation, comparison, lookups, names, and the bandwidth
 * estimates used where neither the probe nor a file gives a figure.
 *
 * Serves every collective indirectly: the component builds a model once per node team and
 * every search and selection reads it.
 */
#include "topo.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

topo_t *topo_new(void)
{
    topo_t *topo = calloc(1, sizeof(*topo));
    if (NULL == topo) {
        return NULL;
    }
    /* Unknown until a probe or a file says otherwise; the diagonal is the GPU itself. */
    for (int a = 0; a < TOPO_MAX_GPUS; ++a) {
        topo->gpus[a].numa = -1;
        for (int b = 0; b < TOPO_MAX_GPUS; ++b) {
            topo_link_t *l = &topo->links[a][b];
            l->cls = (a == b) ? TOPO_LINK_X : TOPO_LINK_SYS;
            l->bw = (a == b) ? TOPO_BW_LOCAL : 0;
            l->p2p = (a == b) ? 1 : -1;
            l->atomics = (a == b) ? 1 : -1;
            l->perf_rank = (a == b) ? 0 : -1;
        }
        for (int k = 0; k < TOPO_MAX_NICS; ++k) {
            topo->gpu_nic[a][k] = TOPO_LINK_SYS;
        }
    }
    for (int k = 0; k < TOPO_MAX_NICS; ++k) {
        topo->nics[k].numa = -1;
    }
    return topo;
}

void topo_free(topo_t *topo)
{
    free(topo);
}

/* Field by field: the structs hold padding and unused tails of string buffers, so memcmp
 * would compare garbage. */
bool topo_equal(const topo_t *a, const topo_t *b)
{
    if (NULL == a || NULL == b) {
        return a == b;
    }
    if (0 != strcmp(a->host, b->host) || 0 != strcmp(a->source, b->source) ||
        a->ngpus != b->ngpus || a->nnics != b->nnics || a->nnuma != b->nnuma) {
        return false;
    }
    for (int i = 0; i < a->nnuma; ++i) {
        const topo_numa_t *x = &a->numa[i], *y = &b->numa[i];
        if (x->os_index != y->os_index || x->package != y->package ||
            0 != strcmp(x->cpus, y->cpus)) {
            return false;
        }
    }
    for (int i = 0; i < a->ngpus; ++i) {
        const topo_gpu_t *x = &a->gpus[i], *y = &b->gpus[i];
        if (0 != memcmp(x->uuid, y->uuid, TOPO_UUID_BYTES) || 0 != strcmp(x->bus_id, y->bus_id) ||
            0 != strcmp(x->name, y->name) || x->numa != y->numa || 0 != strcmp(x->cpus, y->cpus) ||
            x->sm != y->sm || x->pcie_gen != y->pcie_gen || x->pcie_width != y->pcie_width ||
            x->nvswitch_links != y->nvswitch_links || x->nvlink_bw != y->nvlink_bw) {
            return false;
        }
    }
    for (int i = 0; i < a->nnics; ++i) {
        const topo_nic_t *x = &a->nics[i], *y = &b->nics[i];
        if (0 != strcmp(x->name, y->name) || x->kind != y->kind ||
            0 != strcmp(x->bus_id, y->bus_id) || 0 != strcmp(x->netdev, y->netdev) ||
            x->numa != y->numa || x->speed != y->speed) {
            return false;
        }
    }
    for (int i = 0; i < a->ngpus; ++i) {
        for (int j = 0; j < a->ngpus; ++j) {
            const topo_link_t *x = &a->links[i][j], *y = &b->links[i][j];
            if (x->cls != y->cls || x->nvlinks != y->nvlinks || x->bw != y->bw ||
                x->p2p != y->p2p || x->atomics != y->atomics || x->perf_rank != y->perf_rank) {
                return false;
            }
        }
        for (int k = 0; k < a->nnics; ++k) {
            if (a->gpu_nic[i][k] != b->gpu_nic[i][k]) {
                return false;
            }
        }
    }
    return true;
}

/* The component identifies its GPU by UUID: CUDA ordinals differ between processes. */
int topo_find_gpu_by_uuid(const topo_t *topo, const uint8_t uuid[TOPO_UUID_BYTES])
{
    if (NULL == topo || NULL == uuid) {
        return -1;
    }
    for (int i = 0; i < topo->ngpus; ++i) {
        if (0 == memcmp(topo->gpus[i].uuid, uuid, TOPO_UUID_BYTES)) {
            return i;
        }
    }
    return -1;
}

int topo_find_gpu_by_bus_id(const topo_t *topo, const char *bus_id)
{
    char norm[TOPO_BUSID_LEN];
    if (NULL == topo || TOPO_OK != topo_bus_id_normalize(bus_id, norm, sizeof(norm))) {
        return -1;
    }
    for (int i = 0; i < topo->ngpus; ++i) {
        if (0 == strcmp(topo->gpus[i].bus_id, norm)) {
            return i;
        }
    }
    return -1;
}

void topo_uuid_format(const uint8_t uuid[TOPO_UUID_BYTES], char out[TOPO_UUID_STRLEN])
{
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    memcpy(p, "GPU-", 4);
    p += 4;
    for (int i = 0; i < TOPO_UUID_BYTES; ++i) {
        /* The 8-4-4-4-12 grouping of RFC 4122, as nvidia-smi -L prints it. */
        if (4 == i || 6 == i || 8 == i || 10 == i) {
            *p++ = '-';
        }
        *p++ = hex[uuid[i] >> 4];
        *p++ = hex[uuid[i] & 0xf];
    }
    *p = '\0';
}

static int hex_value(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = tolower(c);
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Strict: exactly 32 hex digits in the 8-4-4-4-12 groups, nothing after. */
int topo_uuid_parse(const char *text, uint8_t uuid[TOPO_UUID_BYTES])
{
    static const int dash_before[] = {4, 6, 8, 10};
    const char *p = text;
    int d = 0;
    if (NULL == text) {
        return TOPO_ERR_ARG;
    }
    if (0 == strncmp(p, "GPU-", 4)) {
        p += 4;
    }
    for (int i = 0; i < TOPO_UUID_BYTES; ++i) {
        if (d < 4 && dash_before[d] == i) {
            if ('-' != *p) {
                return TOPO_ERR_PARSE;
            }
            ++p;
            ++d;
        }
        int hi = hex_value((unsigned char) p[0]);
        int lo = (hi < 0) ? -1 : hex_value((unsigned char) p[1]);
        if (hi < 0 || lo < 0) {
            return TOPO_ERR_PARSE;
        }
        uuid[i] = (uint8_t) (hi << 4 | lo);
        p += 2;
    }
    return ('\0' == *p) ? TOPO_OK : TOPO_ERR_PARSE;
}

int topo_bus_id_normalize(const char *in, char *out, size_t len)
{
    unsigned long domain = 0, bus, dev, fn;
    char tail;
    if (NULL == in || NULL == out) {
        return TOPO_ERR_ARG;
    }
    /* NVML prints an 8-digit domain, CUDA and hwloc 4 digits, lspci may omit it. */
    if (4 != sscanf(in, "%lx:%lx:%lx.%lx%c", &domain, &bus, &dev, &fn, &tail)) {
        domain = 0;
        if (3 != sscanf(in, "%lx:%lx.%lx%c", &bus, &dev, &fn, &tail)) {
            return TOPO_ERR_PARSE;
        }
    }
    for (const char *p = in; '\0' != *p; ++p) {
        if (!isxdigit((unsigned char) *p) && ':' != *p && '.' != *p) {
            return TOPO_ERR_PARSE;
        }
    }
    if (domain > 0xffffffffUL || bus > 0xff || dev > 0x1f || fn > 7) {
        return TOPO_ERR_PARSE;
    }
    int w = snprintf(out, len, (domain > 0xffff) ? "%08lx:%02lx:%02lx.%lx" : "%04lx:%02lx:%02lx.%lx",
                     domain, bus, dev, fn);
    return (w < 0 || (size_t) w >= len) ? TOPO_ERR_ARG : TOPO_OK;
}

/*
 * Bandwidth estimates (MB/s, one direction).  NVLink 2, 3 and 4 (V100, A100, H100/H200) carry
 * 25 GB/s per link and direction, NVLink 1 (P100) 20, NVLink 5 (B200) 50.  PCIe figures are
 * what a copy achieves in practice, about 75% of the raw lane rate.  These only rank paths and
 * fill the matrix; a measured file may carry better figures.
 */
uint32_t topo_nvlink_bw_for_sm(int sm)
{
    if (sm > 0 && sm < 70) {
        return 20000;
    }
    if (sm >= 100) {
        return 50000;
    }
    return 25000;
}

uint32_t topo_pcie_bw(int gen, int width)
{
    static const uint32_t per_lane[] = {0, 200, 400, 750, 1500, 3000, 6000};
    if (gen <= 0 || gen > 6) {
        gen = 4; /* unknown: assume the common case of today's servers */
    }
    if (width <= 0) {
        width = 16;
    }
    return per_lane[gen] * (uint32_t) width;
}

static uint32_t gpu_link_bw(const topo_gpu_t *g)
{
    return (0 != g->nvlink_bw) ? g->nvlink_bw : topo_nvlink_bw_for_sm(g->sm);
}

uint32_t topo_default_link_bw(const topo_t *topo, int a, int b)
{
    const topo_gpu_t *ga = &topo->gpus[a], *gb = &topo->gpus[b];
    const topo_link_t *l = &topo->links[a][b];
    uint32_t per_link = gpu_link_bw(ga) < gpu_link_bw(gb) ? gpu_link_bw(ga) : gpu_link_bw(gb);
    uint32_t pa = topo_pcie_bw(ga->pcie_gen, ga->pcie_width);
    uint32_t pb = topo_pcie_bw(gb->pcie_gen, gb->pcie_width);
    uint32_t pcie = pa < pb ? pa : pb;

    switch (l->cls) {
    case TOPO_LINK_X:
        return TOPO_BW_LOCAL;
    case TOPO_LINK_NVL:
    case TOPO_LINK_NVS:
        return (uint32_t) (l->nvlinks > 0 ? l->nvlinks : 1) * per_link;
    case TOPO_LINK_PIX:
    case TOPO_LINK_PXB:
        return pcie;
    case TOPO_LINK_PHB:
        /* the root complex costs some of the switch-local figure */
        return pcie / 5 * 4;
    default:
        /* crossing the socket interconnect roughly halves peer traffic */
        return pcie / 2;
    }
}

/* Links are symmetric in the model; this is the one writer that keeps both halves equal. */
void topo_set_link(topo_t *topo, int a, int b, topo_link_class_t cls, int nvlinks, uint32_t bw)
{
    topo_link_t *l = &topo->links[a][b];
    l->cls = cls;
    l->nvlinks = (TOPO_LINK_NVL == cls || TOPO_LINK_NVS == cls) ? nvlinks : 0;
    if (TOPO_LINK_NVS == cls && 0 == nvlinks) {
        /* through the switches a pair gets the smaller of the two GPUs' switch links */
        int sa = topo->gpus[a].nvswitch_links, sb = topo->gpus[b].nvswitch_links;
        l->nvlinks = sa < sb ? sa : sb;
    }
    l->bw = (0 != bw) ? bw : topo_default_link_bw(topo, a, b);
    topo->links[b][a].cls = l->cls;
    topo->links[b][a].nvlinks = l->nvlinks;
    topo->links[b][a].bw = l->bw;
}

/* ---- names ----------------------------------------------------------------------------- */

static const char *const link_class_names[TOPO_LINK_COUNT] = {
    "X", "NVL", "NVS", "PIX", "PXB", "PHB", "SYS",
};

const char *topo_link_class_name(topo_link_class_t cls)
{
    return ((unsigned) cls < TOPO_LINK_COUNT) ? link_class_names[cls] : "?";
}

int topo_link_class_from_name(const char *name)
{
    for (int i = 0; NULL != name && i < TOPO_LINK_COUNT; ++i) {
        if (0 == strcasecmp(name, link_class_names[i])) {
            return i;
        }
    }
    return -1;
}

static const char *const p2p_level_names[TOPO_P2P_LEVEL_COUNT] = {
    "auto", "NVL", "PIX", "PXB", "PHB", "SYS",
};

const char *topo_p2p_level_name(topo_p2p_level_t level)
{
    return ((unsigned) level < TOPO_P2P_LEVEL_COUNT) ? p2p_level_names[level] : "?";
}

int topo_p2p_level_from_name(const char *name)
{
    for (int i = 0; NULL != name && i < TOPO_P2P_LEVEL_COUNT; ++i) {
        if (0 == strcasecmp(name, p2p_level_names[i])) {
            return i;
        }
    }
    return -1;
}

static const char *const nic_kind_names[TOPO_NIC_KIND_COUNT] = {"ib", "roce", "eth"};

const char *topo_nic_kind_name(topo_nic_kind_t kind)
{
    return ((unsigned) kind < TOPO_NIC_KIND_COUNT) ? nic_kind_names[kind] : "?";
}

int topo_nic_kind_from_name(const char *name)
{
    for (int i = 0; NULL != name && i < TOPO_NIC_KIND_COUNT; ++i) {
        if (0 == strcasecmp(name, nic_kind_names[i])) {
            return i;
        }
    }
    return -1;
}
