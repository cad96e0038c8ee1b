/*
 * topo_select.c - algorithm selection for MPI_Allreduce and MPI_Bcast on device buffers: one
 * decision table from (collective, size, ranks per node, nodes, link class, peer access) to
 * an algorithm with its chunking, plus the MCA overrides, with a one-line reason for
 * coll_gpu_verbose.
 *
 * Order of decision:
 *   1. one rank in all          -> the trivial kernel path (a local copy, or nothing);
 *   2. several nodes            -> staged (the UCX pipeline is not in yet);
 *   3. a forced algorithm       -> honoured when the team can run it, else 4. with the reason;
 *   4. the table: first row whose collective, link group, ranks per node, size and peer-access
 *      need all match.  The last rows of each collective match anything, so a row is always
 *      found.
 *
 * THE THRESHOLDS BELOW ARE INITIAL VALUES, to be tuned by measurement (tests/bench): they come
 * from the traffic of each algorithm and the NCCL figures of DEVICE.md, not from runs of our
 * kernels yet.  Change a row, not the code around it.
 */
#include "topo.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define KiB ((size_t) 1024)
#define MiB (1024 * KiB)
#define ANY SIZE_MAX

/* Link groups: the team's worst class decides.  X (every rank on one GPU) moves data at
 * device-memory speed and is treated as NVLink. */
#define G_NVLINK ((1u << TOPO_LINK_X) | (1u << TOPO_LINK_NVL) | (1u << TOPO_LINK_NVS))
#define G_NVLINK_PEERS ((1u << TOPO_LINK_NVL) | (1u << TOPO_LINK_NVS)) /* GPUs, not one GPU */
#define G_PCIE_NEAR ((1u << TOPO_LINK_PIX) | (1u << TOPO_LINK_PXB))
#define G_PCIE_FAR ((1u << TOPO_LINK_PHB) | (1u << TOPO_LINK_SYS))
#define G_ALL (G_NVLINK | G_PCIE_NEAR | G_PCIE_FAR)

/* What peer access a row needs from the team. */
enum { NEED_ALL = 0, NEED_RING = 1, NEED_NONE = 2 };

typedef struct {
    topo_coll_t coll;
    unsigned links;     /* link groups the row applies to */
    int need;           /* NEED_ALL: p2p_all; NEED_RING: p2p_ring; NEED_NONE: nothing */
    int min_rpn, max_rpn;
    size_t max_bytes;   /* the row applies up to and including this size */
    int alg;
    size_t chunk;       /* pipeline chunk at large sizes; 0: not pipelined */
    int max_blocks;     /* thread blocks at large sizes */
    int nthreads;
    const char *why;
} rule_t;

static const rule_t table[] = {
    /* ---- allreduce, peer access between all pairs, NVLink / NVSwitch, a GPU per rank ------
     * fused: one kernel, no host round trip; every rank pushes its data to all peers, so the
     * window falls as n grows, like one-shot's (the rows of teams sharing a GPU follow); up to
     * 16 KiB on 2-4 ranks its data travel in low-latency words, with no fence (dev.h).  The
     * windows stay within one piece of the default 1 MiB slot.
     * Above 32 MiB on 2 ranks, two-shot by copy engines (pull, reduce, push overlapped; its
     * chunk is the largest piece, coll_gpu_nvl.c): on 2xH200 NV18 (2026-12-01, forced)
     * 286-314 / 345 / 357 / 358 GB/s busbw at 64 / 128 / 256 / 512 MiB against 272 / 280 / 289
     * / 293 for the SM two-shot; at 32 MiB the SM two-shot is ahead (252 against 239 GB/s, and
     * 1.12 against 1.01 x NCCL's busbw in another run).  Measured there too: fused 8 B ~14 us
     * (floor ~8-9). */
    {TOPO_COLL_ALLREDUCE, G_NVLINK_PEERS, NEED_ALL, 2, 2, 256 * KiB, TOPO_AR_FUSED, 0, 32, 512,
     "latency-bound: one kernel pushes, flags and reduces, no host round trip"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK_PEERS, NEED_ALL, 3, 4, 128 * KiB, TOPO_AR_FUSED, 0, 32, 512,
     "latency-bound: one kernel pushes, flags and reduces, no host round trip"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK_PEERS, NEED_ALL, 5, 8, 64 * KiB, TOPO_AR_FUSED, 0, 32, 512,
     "latency-bound: one kernel pushes, flags and reduces, no host round trip"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK_PEERS, NEED_ALL, 9, INT32_MAX, 32 * KiB, TOPO_AR_FUSED, 0, 32,
     512, "latency-bound: one kernel pushes, flags and reduces, no host round trip"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK_PEERS, NEED_ALL, 2, 2, 32 * MiB, TOPO_AR_TWOSHOT, 0, 32, 512,
     "bandwidth-bound on an all-to-all fabric: reduce-scatter + all-gather by peer loads"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK_PEERS, NEED_ALL, 2, 2, ANY, TOPO_AR_TWOSHOT_CE, 64 * MiB, 32,
     512, "large on NVLink: two-shot by copy-engine pulls, overlapped with the local reduce"},

    /* ---- allreduce, peer access between all pairs, NVLink / NVSwitch / one GPU ----------
     * one-shot moves (n-1)*S per GPU in one step: best while latency dominates; two-shot moves
     * 2*S*(n-1)/n in two steps.  The crossover falls as n grows.  2xH200 NV18: ~256 KiB. */
    {TOPO_COLL_ALLREDUCE, G_NVLINK, NEED_ALL, 2, 2, 256 * KiB, TOPO_AR_ONESHOT, 0, 16, 512,
     "latency-bound: one step, every rank reads all peers"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK, NEED_ALL, 3, 4, 128 * KiB, TOPO_AR_ONESHOT, 0, 16, 512,
     "latency-bound: one step, every rank reads all peers"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK, NEED_ALL, 5, 8, 64 * KiB, TOPO_AR_ONESHOT, 0, 16, 512,
     "latency-bound: one step, every rank reads all peers"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK, NEED_ALL, 9, INT32_MAX, 32 * KiB, TOPO_AR_ONESHOT, 0, 16,
     512, "latency-bound: one step, every rank reads all peers"},
    {TOPO_COLL_ALLREDUCE, G_NVLINK, NEED_ALL, 1, INT32_MAX, ANY, TOPO_AR_TWOSHOT, 0, 32, 512,
     "bandwidth-bound on an all-to-all fabric: reduce-scatter + all-gather by peer loads"},

    /* ---- allreduce, peer access between all pairs, PCIe switches ------------------------
     * PCIe is ~20x slower than NVLink, so the one-shot window is narrower; at large sizes the
     * ring keeps each transfer on neighbouring switch ports. */
    {TOPO_COLL_ALLREDUCE, G_PCIE_NEAR, NEED_ALL, 1, 4, 32 * KiB, TOPO_AR_ONESHOT, 0, 8, 512,
     "latency-bound: one step, every rank reads all peers"},
    {TOPO_COLL_ALLREDUCE, G_PCIE_NEAR, NEED_ALL, 5, INT32_MAX, 16 * KiB, TOPO_AR_ONESHOT, 0, 8,
     512, "latency-bound: one step, every rank reads all peers"},
    {TOPO_COLL_ALLREDUCE, G_PCIE_NEAR, NEED_ALL, 1, INT32_MAX, 1 * MiB, TOPO_AR_TWOSHOT, 0, 8,
     512, "mid-size on PCIe: two steps, half of one-shot's traffic"},
    {TOPO_COLL_ALLREDUCE, G_PCIE_NEAR, NEED_ALL, 1, INT32_MAX, ANY, TOPO_AR_RING, 512 * KiB, 8,
     512, "bandwidth-bound on PCIe: pipelined ring between neighbours"},

    /* ---- allreduce, peer access allowed through the CPU (coll_gpu_p2p_level PHB/SYS) ---- */
    {TOPO_COLL_ALLREDUCE, G_PCIE_FAR, NEED_ALL, 1, INT32_MAX, 16 * KiB, TOPO_AR_ONESHOT, 0, 4,
     512, "latency-bound: one step, every rank reads all peers"},
    {TOPO_COLL_ALLREDUCE, G_PCIE_FAR, NEED_ALL, 1, INT32_MAX, ANY, TOPO_AR_RING, 512 * KiB, 8,
     512, "through the CPU: pipelined ring, one transfer per hop"},

    /* ---- allreduce, peer access only between ring neighbours, or none ------------------- */
    {TOPO_COLL_ALLREDUCE, G_ALL, NEED_RING, 1, INT32_MAX, ANY, TOPO_AR_RING, 512 * KiB, 8, 512,
     "peer access only between ring neighbours: ring"},
    {TOPO_COLL_ALLREDUCE, G_ALL, NEED_NONE, 1, INT32_MAX, ANY, TOPO_AR_STAGED, 4 * MiB, 0, 0,
     "no peer access between ring neighbours: staged through host memory"},

    /* ---- bcast, peer access between all pairs, NVLink / NVSwitch / one GPU --------------
     * push: one step from the root, the root's links carry (n-1)*S; a pipelined chain carries
     * S per link; the binary tree sits between (depth log2 n, 2*S out of each parent).
     * 2xH200 NV18: push up to ~64 KiB. */
    {TOPO_COLL_BCAST, G_NVLINK, NEED_ALL, 1, 8, 64 * KiB, TOPO_BC_PUSH, 0, 16, 512,
     "latency-bound: one step from the root"},
    {TOPO_COLL_BCAST, G_NVLINK, NEED_ALL, 9, INT32_MAX, 32 * KiB, TOPO_BC_PUSH, 0, 16, 512,
     "latency-bound: one step from the root"},
    {TOPO_COLL_BCAST, G_NVLINK, NEED_ALL, 1, 2, ANY, TOPO_BC_PULL, 0, 16, 512,
     "two ranks: one copy-engine pull of the root's buffer (~390 GB/s on NV18)"},
    {TOPO_COLL_BCAST, G_NVLINK, NEED_ALL, 3, INT32_MAX, 4 * MiB, TOPO_BC_TREE, 512 * KiB, 16,
     512, "mid-size: pipelined binary tree, log2(n) deep"},
    {TOPO_COLL_BCAST, G_NVLINK, NEED_ALL, 1, INT32_MAX, ANY, TOPO_BC_CHAIN, 4 * MiB, 16, 512,
     "bandwidth-bound: pipelined chain, every link carries the message once"},

    /* ---- bcast, peer access between all pairs, PCIe ------------------------------------ */
    {TOPO_COLL_BCAST, G_PCIE_NEAR | G_PCIE_FAR, NEED_ALL, 1, INT32_MAX, 16 * KiB, TOPO_BC_PUSH,
     0, 4, 512, "latency-bound: one step from the root"},
    {TOPO_COLL_BCAST, G_PCIE_NEAR, NEED_ALL, 4, INT32_MAX, 1 * MiB, TOPO_BC_TREE, 256 * KiB, 8,
     512, "mid-size: pipelined binary tree, log2(n) deep"},
    {TOPO_COLL_BCAST, G_PCIE_NEAR | G_PCIE_FAR, NEED_ALL, 1, INT32_MAX, ANY, TOPO_BC_CHAIN,
     512 * KiB, 8, 512, "bandwidth-bound: pipelined chain, every link carries the message once"},

    /* ---- bcast, peer access only between ring neighbours, or none ----------------------- */
    {TOPO_COLL_BCAST, G_ALL, NEED_RING, 1, INT32_MAX, ANY, TOPO_BC_CHAIN, 512 * KiB, 8, 512,
     "peer access only between ring neighbours: chain along the ring"},
    {TOPO_COLL_BCAST, G_ALL, NEED_NONE, 1, INT32_MAX, ANY, TOPO_BC_STAGED, 4 * MiB, 0, 0,
     "no peer access between ring neighbours: staged through host memory"},
};
#define NRULES ((int) (sizeof(table) / sizeof(table[0])))

/* ---- names ----------------------------------------------------------------------------- */

const topo_enum_value_t topo_allreduce_alg_values[] = {
    {TOPO_AR_AUTO, "auto"},       {TOPO_AR_STAGED, "staged"}, {TOPO_AR_ONESHOT, "oneshot"},
    {TOPO_AR_TWOSHOT, "twoshot"}, {TOPO_AR_RING, "ring"},     {TOPO_AR_FUSED, "fused"},
    {TOPO_AR_TWOSHOT_CE, "twoshot_ce"}, {0, NULL},
};

const topo_enum_value_t topo_bcast_alg_values[] = {
    {TOPO_BC_AUTO, "auto"},   {TOPO_BC_STAGED, "staged"}, {TOPO_BC_PUSH, "push"},
    {TOPO_BC_CHAIN, "chain"}, {TOPO_BC_TREE, "tree"},     {TOPO_BC_PULL, "pull"},
    {0, NULL},
};

const topo_enum_value_t topo_p2p_level_values[] = {
    {TOPO_P2P_LEVEL_AUTO, "auto"}, {TOPO_P2P_LEVEL_NVL, "NVL"}, {TOPO_P2P_LEVEL_PIX, "PIX"},
    {TOPO_P2P_LEVEL_PXB, "PXB"},   {TOPO_P2P_LEVEL_PHB, "PHB"}, {TOPO_P2P_LEVEL_SYS, "SYS"},
    {0, NULL},
};

static const topo_enum_value_t *alg_values(topo_coll_t coll)
{
    return (TOPO_COLL_BCAST == coll) ? topo_bcast_alg_values : topo_allreduce_alg_values;
}

const char *topo_coll_name(topo_coll_t coll)
{
    switch (coll) {
    case TOPO_COLL_ALLREDUCE:
        return "allreduce";
    case TOPO_COLL_BCAST:
        return "bcast";
    default:
        return "?";
    }
}

const char *topo_alg_name(topo_coll_t coll, int alg)
{
    for (const topo_enum_value_t *v = alg_values(coll); NULL != v->name; ++v) {
        if (v->value == alg) {
            return v->name;
        }
    }
    return "?";
}

int topo_alg_from_name(topo_coll_t coll, const char *name)
{
    for (const topo_enum_value_t *v = alg_values(coll); NULL != name && NULL != v->name; ++v) {
        if (0 == strcasecmp(v->name, name)) {
            return v->value;
        }
    }
    return -1;
}

bool topo_alg_needs_p2p_all(topo_coll_t coll, int alg)
{
    if (TOPO_COLL_BCAST == coll) {
        return TOPO_BC_PUSH == alg || TOPO_BC_TREE == alg || TOPO_BC_PULL == alg;
    }
    return TOPO_AR_ONESHOT == alg || TOPO_AR_TWOSHOT == alg || TOPO_AR_FUSED == alg
           || TOPO_AR_TWOSHOT_CE == alg;
}

bool topo_alg_needs_p2p_ring(topo_coll_t coll, int alg)
{
    if (TOPO_COLL_BCAST == coll) {
        return TOPO_BC_CHAIN == alg;
    }
    return TOPO_AR_RING == alg;
}

bool topo_alg_needs_own_gpu(topo_coll_t coll, int alg)
{
    return TOPO_COLL_ALLREDUCE == coll && TOPO_AR_FUSED == alg;
}

/* ---- the decision ---------------------------------------------------------------------- */

static int team_need(const topo_select_in_t *in)
{
    return in->p2p_all ? NEED_ALL : in->p2p_ring ? NEED_RING : NEED_NONE;
}

/* Rows a team satisfies: a row needing less peer access than the team has applies too. */
static bool row_matches(const rule_t *r, const topo_select_in_t *in, bool ignore_size)
{
    unsigned link_bit = 1u << ((unsigned) in->link < TOPO_LINK_COUNT ? in->link : TOPO_LINK_SYS);
    return r->coll == in->coll && 0 != (r->links & link_bit) && r->need >= team_need(in) &&
           in->ranks_per_node >= r->min_rpn && in->ranks_per_node <= r->max_rpn &&
           (ignore_size || in->bytes <= r->max_bytes) &&
           !(topo_alg_needs_own_gpu(r->coll, r->alg) && in->gpus_per_node < in->ranks_per_node);
}

static const char *size_text(size_t bytes, char *buf, size_t len)
{
    if (bytes >= MiB && 0 == bytes % MiB) {
        snprintf(buf, len, "%zu MiB", bytes / MiB);
    } else if (bytes >= KiB && 0 == bytes % KiB) {
        snprintf(buf, len, "%zu KiB", bytes / KiB);
    } else {
        snprintf(buf, len, "%zu B", bytes);
    }
    return buf;
}

/* Chunk and blocks for an algorithm chosen by row r, then the overrides. */
static void fill_params(const rule_t *r, const topo_select_in_t *in, topo_plan_t *plan)
{
    size_t chunk = r->chunk;
    if (0 != chunk) {
        /* small pipelined messages still get ~8 chunks in flight, 64 KiB at least */
        size_t eighth = ((in->bytes / 8) + 4 * KiB - 1) / (4 * KiB) * (4 * KiB);
        size_t floor_ = (eighth > 64 * KiB) ? eighth : 64 * KiB;
        chunk = (floor_ < chunk) ? floor_ : chunk;
        /* and a message smaller than that is one chunk of its own (4 KiB aligned) size */
        size_t whole = (in->bytes + 4 * KiB - 1) / (4 * KiB) * (4 * KiB);
        chunk = (whole > 0 && whole < chunk) ? whole : chunk;
    }
    plan->chunk_bytes = chunk;
    plan->nthreads = r->nthreads;
    if (r->max_blocks > 0) {
        /* one block per 32 KiB (per chunk when pipelined), up to the row's limit */
        size_t per = (0 != chunk) ? chunk : 32 * KiB;
        size_t want = (in->bytes + per - 1) / per;
        plan->nblocks = (want < 1) ? 1 : (want > (size_t) r->max_blocks) ? r->max_blocks : (int) want;
    } else {
        plan->nblocks = 0; /* no kernel: staged */
    }
    if (in->nblocks > 0 && r->max_blocks > 0) {
        plan->nblocks = in->nblocks;
    }
    if (in->nthreads > 0 && r->nthreads > 0) {
        plan->nthreads = in->nthreads;
    }
    if (in->chunk_bytes > 0 && 0 != plan->chunk_bytes) {
        plan->chunk_bytes = in->chunk_bytes;
    }
    plan->nchunks = (0 != plan->chunk_bytes)
                        ? (in->bytes + plan->chunk_bytes - 1) / plan->chunk_bytes
                        : 1;
    if (0 == plan->nchunks) {
        plan->nchunks = 1;
    }
}

static void team_text(const topo_select_in_t *in, char *buf, size_t len)
{
    topo_link_t l = {.cls = in->link, .nvlinks = in->nvlinks};
    char label[TOPO_LABEL_LEN], size[32];
    topo_link_label(&l, label);
    snprintf(buf, len, "%s, %d rank%s/node on %d GPU%s, %d node%s, %s, peer access %s",
             size_text(in->bytes, size, sizeof(size)), in->ranks_per_node,
             (1 == in->ranks_per_node) ? "" : "s", in->gpus_per_node,
             (1 == in->gpus_per_node) ? "" : "s", in->nodes, (1 == in->nodes) ? "" : "s", label,
             in->p2p_all ? "all pairs" : in->p2p_ring ? "ring neighbours" : "none");
}

/* A plan without a row: one rank, several nodes.  Blocks/threads only matter for kernels. */
static void plain_plan(const topo_select_in_t *in, topo_plan_t *plan, int alg, const char *why)
{
    char team[TOPO_TEXT_LEN / 2];
    plan->alg = alg;
    plan->nblocks = (TOPO_AR_STAGED == alg) ? 0 : 1;
    plan->nthreads = (TOPO_AR_STAGED == alg) ? 0 : 512;
    plan->chunk_bytes = (TOPO_AR_STAGED == alg) ? 4 * MiB : 0;
    if (in->chunk_bytes > 0 && 0 != plan->chunk_bytes) {
        plan->chunk_bytes = in->chunk_bytes;
    }
    plan->nchunks = (0 != plan->chunk_bytes && in->bytes > 0)
                        ? (in->bytes + plan->chunk_bytes - 1) / plan->chunk_bytes
                        : 1;
    if (in->quiet) {
        return;
    }
    team_text(in, team, sizeof(team));
    snprintf(plan->reason, sizeof(plan->reason), "%s: %s (%s)", topo_alg_name(in->coll, alg),
             why, team);
}

void topo_select(const topo_select_in_t *in, topo_plan_t *plan)
{
    char team[TOPO_TEXT_LEN / 2], note[160] = "";
    const rule_t *row = NULL;
    int forced = in->forced_alg;
    int nalgs = (TOPO_COLL_BCAST == in->coll) ? TOPO_BC_COUNT : TOPO_AR_COUNT;
    /* TOPO_AR_STAGED == TOPO_BC_STAGED == 1: one name for "staged" in both enums */
    const int staged = TOPO_AR_STAGED;

    memset(plan, 0, sizeof(*plan));
    if (forced < 0 || forced >= nalgs) {
        snprintf(note, sizeof(note), "unknown forced algorithm %d ignored; ", forced);
        forced = 0;
    }

    if (in->ranks_per_node * in->nodes <= 1) {
        plain_plan(in, plan, (TOPO_COLL_BCAST == in->coll) ? TOPO_BC_PUSH : TOPO_AR_ONESHOT,
                   "one rank: nothing to exchange, a local copy at most");
        return;
    }
    if (in->nodes > 1) {
        plain_plan(in, plan, staged,
                   (0 != forced && staged != forced)
                       ? "several nodes: only staged runs across nodes so far (forced algorithm "
                         "ignored)"
                       : "several nodes: only staged runs across nodes so far");
        plan->forced = (staged == forced);
        return;
    }

    if (0 != forced) {
        bool ok = !(topo_alg_needs_p2p_all(in->coll, forced) && !in->p2p_all) &&
                  !(topo_alg_needs_p2p_ring(in->coll, forced) && !in->p2p_ring);
        if (ok) {
            /* the parameters of the forced algorithm come from its first row for this team */
            for (int i = 0; i < NRULES && NULL == row; ++i) {
                if (table[i].alg == forced && row_matches(&table[i], in, true)) {
                    row = &table[i];
                }
            }
            for (int i = 0; i < NRULES && NULL == row; ++i) {
                if (table[i].alg == forced && table[i].coll == in->coll) {
                    row = &table[i];
                }
            }
            plan->alg = forced;
            plan->forced = true;
            fill_params(row, in, plan);
            if (!in->quiet) {
                team_text(in, team, sizeof(team));
                snprintf(plan->reason, sizeof(plan->reason),
                         "%s: forced by the MCA parameter (%s)", topo_alg_name(in->coll, forced),
                         team);
            }
            return;
        }
        snprintf(note, sizeof(note), "forced %s needs peer access %s, which this team lacks; ",
                 topo_alg_name(in->coll, forced),
                 topo_alg_needs_p2p_all(in->coll, forced) ? "between all pairs"
                                                          : "between ring neighbours");
    }

    for (int i = 0; i < NRULES && NULL == row; ++i) {
        if (row_matches(&table[i], in, false)) {
            row = &table[i];
            plan->alg = row->alg;
            fill_params(row, in, plan);
            if (!in->quiet) {
                team_text(in, team, sizeof(team));
                snprintf(plan->reason, sizeof(plan->reason), "%s: %s%s [row %d] (%s)",
                         topo_alg_name(in->coll, row->alg), note, row->why, i, team);
            }
        }
    }
    if (NULL == row) {
        /* unreachable while the NEED_NONE rows match everything; staged is always correct */
        plain_plan(in, plan, staged, "no table row matched");
    }
}

void topo_select_in_from_team(topo_select_in_t *in, const topo_team_info_t *team, int nodes)
{
    in->ranks_per_node = team->n;
    in->gpus_per_node = team->ngpus;
    in->nodes = nodes;
    in->link = team->worst;
    in->nvlinks = team->nvlinks;
    in->p2p_all = team->p2p_all;
    in->p2p_ring = team->p2p_ring;
}
