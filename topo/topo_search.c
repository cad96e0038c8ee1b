/*
 * topo_search.c - questions asked of the model for one team of ranks: link labels, peer
 * access under coll_gpu_p2p_level / coll_gpu_p2p_disable, rings, broadcast trees, and the
 * team summary that selection and the logs use (with a warning when the links are mixed).
 *
 * Serves MPI_Allreduce (ring order, team link class) and MPI_Bcast (chain and tree shapes).
 * Every answer is a pure function of the model and the team, with fixed tie-breaks, because
 * all ranks of a team must compute the same ring and the same tree without talking.
 */
#include "topo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXACT_RING_MAX 9 /* 8! orders of the other GPUs at most: a few ms, once per team */

const char *topo_link_label(const topo_link_t *link, char buf[TOPO_LABEL_LEN])
{
    if (TOPO_LINK_NVL == link->cls) {
        snprintf(buf, TOPO_LABEL_LEN, "NV%d", link->nvlinks);
    } else if (TOPO_LINK_NVS == link->cls) {
        if (link->nvlinks > 0) {
            snprintf(buf, TOPO_LABEL_LEN, "NVS%d", link->nvlinks);
        } else {
            snprintf(buf, TOPO_LABEL_LEN, "NVS");
        }
    } else {
        snprintf(buf, TOPO_LABEL_LEN, "%s", topo_link_class_name(link->cls));
    }
    return buf;
}

/* The worst class a P2P level lets through. */
static topo_link_class_t level_limit(topo_p2p_level_t level)
{
    switch (level) {
    case TOPO_P2P_LEVEL_NVL:
        return TOPO_LINK_NVS;
    case TOPO_P2P_LEVEL_PIX:
        return TOPO_LINK_PIX;
    case TOPO_P2P_LEVEL_PHB:
        return TOPO_LINK_PHB;
    case TOPO_P2P_LEVEL_SYS:
        return TOPO_LINK_SYS;
    case TOPO_P2P_LEVEL_PXB:
    default:
        /* auto: peer traffic through the CPU's root complex is often slower than staging */
        return TOPO_LINK_PXB;
    }
}

bool topo_p2p_allowed(const topo_t *topo, int a, int b, topo_p2p_level_t level, bool disable,
                      const char **why)
{
    const char *dummy;
    const topo_link_t *l;
    if (NULL == why) {
        why = &dummy;
    }
    if (NULL == topo || a < 0 || b < 0 || a >= topo->ngpus || b >= topo->ngpus) {
        *why = "no such GPU";
        return false;
    }
    /* two ranks on one GPU share its memory through IPC whatever the settings say */
    if (a == b) {
        *why = "same GPU";
        return true;
    }
    if (disable) {
        *why = "disabled by coll_gpu_p2p_disable";
        return false;
    }
    l = &topo->links[a][b];
    if (0 == l->p2p) {
        *why = "the driver reports no peer access";
        return false;
    }
    if (l->cls > level_limit(level)) {
        *why = "path is beyond coll_gpu_p2p_level";
        return false;
    }
    *why = "allowed";
    return true;
}

/* Bandwidth between the GPUs of two ranks; ranks on one GPU copy at device-memory speed. */
static uint32_t hop_bw(const topo_t *topo, int ga, int gb)
{
    return (ga == gb) ? TOPO_BW_LOCAL : topo->links[ga][gb].bw;
}

/* Every search takes a team of model GPU indices; one outside the model is a caller bug. */
static int check_team(const topo_t *topo, const int *team, int n)
{
    if (NULL == topo || NULL == team || n < 1) {
        return TOPO_ERR_ARG;
    }
    for (int i = 0; i < n; ++i) {
        if (team[i] < 0 || team[i] >= topo->ngpus) {
            return TOPO_ERR_ARG;
        }
    }
    return TOPO_OK;
}

/* ---- rings ----------------------------------------------------------------------------- */

/* A candidate ring over the distinct GPUs is scored by its hop bandwidths sorted ascending:
 * the slowest hop decides, then the next slowest, and so on. */
typedef struct {
    const topo_t *topo;
    int d;          /* distinct GPUs */
    const int *gpu; /* the distinct GPUs, in order of first appearance in the team */
} ring_ctx_t;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
    return (x > y) - (x < y);
}

static void ring_score(ring_ctx_t *rc, const int *seq, uint32_t *score)
{
    for (int i = 0; i < rc->d; ++i) {
        score[i] = hop_bw(rc->topo, rc->gpu[seq[i]], rc->gpu[seq[(i + 1) % rc->d]]);
    }
    qsort(score, (size_t) rc->d, sizeof(*score), cmp_u32);
}

/* > 0 when a is better than b. */
static int score_cmp(const uint32_t *a, const uint32_t *b, int d)
{
    for (int i = 0; i < d; ++i) {
        if (a[i] != b[i]) {
            return (a[i] > b[i]) ? 1 : -1;
        }
    }
    return 0;
}

typedef struct {
    ring_ctx_t *rc;
    int *seq;
    bool *used;
    int *best;
    uint32_t *best_score;
    uint32_t *score;
    bool have_best;
} exact_ctx_t;

/* Depth-first over the orders of the remaining GPUs, in index order so that the first of equal
 * rings found is the lexicographically smallest; prunes when a partial ring already has a hop
 * slower than the best ring's slowest. */
static void ring_exact(exact_ctx_t *ec, int depth, uint32_t partial_min)
{
    ring_ctx_t *rc = ec->rc;
    if (depth == rc->d) {
        ring_score(rc, ec->seq, ec->score);
        if (!ec->have_best || score_cmp(ec->score, ec->best_score, rc->d) > 0) {
            memcpy(ec->best, ec->seq, sizeof(int) * (size_t) rc->d);
            memcpy(ec->best_score, ec->score, sizeof(uint32_t) * (size_t) rc->d);
            ec->have_best = true;
        }
        return;
    }
    for (int c = 1; c < rc->d; ++c) {
        if (ec->used[c]) {
            continue;
        }
        uint32_t bw = hop_bw(rc->topo, rc->gpu[ec->seq[depth - 1]], rc->gpu[c]);
        uint32_t m = (bw < partial_min) ? bw : partial_min;
        if (ec->have_best && m < ec->best_score[0]) {
            continue;
        }
        ec->used[c] = true;
        ec->seq[depth] = c;
        ring_exact(ec, depth + 1, m);
        ec->used[c] = false;
    }
}

/* Above EXACT_RING_MAX GPUs: the widest next hop from the start, then 2-opt reversals while
 * they improve the score. */
static void ring_greedy(ring_ctx_t *rc, int *seq, uint32_t *score, uint32_t *cand_score,
                        int *cand, bool *used)
{
    int d = rc->d;
    memset(used, 0, sizeof(bool) * (size_t) d);
    seq[0] = 0;
    used[0] = true;
    for (int i = 1; i < d; ++i) {
        int pick = -1;
        uint32_t pick_bw = 0;
        for (int c = 1; c < d; ++c) {
            uint32_t bw = hop_bw(rc->topo, rc->gpu[seq[i - 1]], rc->gpu[c]);
            if (!used[c] && (pick < 0 || bw > pick_bw)) {
                pick = c;
                pick_bw = bw;
            }
        }
        seq[i] = pick;
        used[pick] = true;
    }
    ring_score(rc, seq, score);
    for (int pass = 0; pass < 64; ++pass) {
        bool improved = false;
        for (int i = 1; i < d - 1; ++i) {
            for (int j = i + 1; j < d; ++j) {
                memcpy(cand, seq, sizeof(int) * (size_t) d);
                for (int lo = i, hi = j; lo < hi; ++lo, --hi) {
                    int t = cand[lo];
                    cand[lo] = cand[hi];
                    cand[hi] = t;
                }
                ring_score(rc, cand, cand_score);
                if (score_cmp(cand_score, score, d) > 0) {
                    memcpy(seq, cand, sizeof(int) * (size_t) d);
                    memcpy(score, cand_score, sizeof(uint32_t) * (size_t) d);
                    improved = true;
                }
            }
        }
        if (!improved) {
            break;
        }
    }
}

/* The ring is searched over distinct GPUs (ranks of one GPU are put side by side after), so
 * several ranks per GPU cost nothing in the search. */
int topo_ring(const topo_t *topo, const int *team, int n, int *order, uint32_t *slowest)
{
    int rc_ = check_team(topo, team, n);
    int d = 0;
    int *gpu, *seq, *best, *cand;
    uint32_t *score, *best_score;
    bool *used;
    if (TOPO_OK != rc_) {
        return rc_;
    }
    if (NULL == order) {
        return TOPO_ERR_ARG;
    }
    gpu = malloc(sizeof(int) * (size_t) n * 4);
    score = malloc(sizeof(uint32_t) * (size_t) n * 2);
    used = calloc((size_t) n, sizeof(bool));
    if (NULL == gpu || NULL == score || NULL == used) {
        free(gpu);
        free(score);
        free(used);
        return TOPO_ERR_NOMEM;
    }
    seq = gpu + n;
    best = gpu + 2 * n;
    cand = gpu + 3 * n;
    best_score = score + n;

    /* distinct GPUs in order of first appearance: team[0]'s GPU comes first */
    for (int i = 0; i < n; ++i) {
        int seen = 0;
        for (int j = 0; j < d; ++j) {
            seen |= (gpu[j] == team[i]);
        }
        if (!seen) {
            gpu[d++] = team[i];
        }
    }
    ring_ctx_t rc = {topo, d, gpu};
    if (d <= 2) {
        for (int i = 0; i < d; ++i) {
            best[i] = i;
        }
    } else if (d <= EXACT_RING_MAX) {
        exact_ctx_t ec = {&rc, seq, used, best, best_score, score, false};
        seq[0] = 0;
        used[0] = true;
        ring_exact(&ec, 1, UINT32_MAX);
    } else {
        ring_greedy(&rc, best, best_score, score, cand, used);
    }

    /* expand: the ranks of one GPU sit together, in node-rank order */
    int k = 0;
    for (int i = 0; i < d; ++i) {
        for (int p = 0; p < n; ++p) {
            if (team[p] == gpu[best[i]]) {
                order[k++] = p;
            }
        }
    }
    if (NULL != slowest) {
        uint32_t m = TOPO_BW_LOCAL;
        for (int i = 0; i < n && n > 1; ++i) {
            uint32_t bw = hop_bw(topo, team[order[i]], team[order[(i + 1) % n]]);
            m = (bw < m) ? bw : m;
        }
        *slowest = m;
    }
    free(gpu);
    free(score);
    free(used);
    return TOPO_OK;
}

/* ---- trees ----------------------------------------------------------------------------- */

/* The chain follows the ring from the root, in the direction that keeps the faster of the
 * two ring hops next to the root (the other one is the hop a chain does not need). */
static int tree_chain(const topo_t *topo, const int *team, int n, int root, const int *ring,
                      int *parent)
{
    int k = 0;
    while (k < n && ring[k] != root) {
        ++k;
    }
    if (k == n) {
        return TOPO_ERR_ARG;
    }
    /* a chain uses n-1 of the ring's n hops: leave out the slower hop touching the root */
    int pred = ring[(k + n - 1) % n], succ = ring[(k + 1) % n];
    uint32_t bw_pred = hop_bw(topo, team[pred], team[root]);
    uint32_t bw_succ = hop_bw(topo, team[root], team[succ]);
    int step = (bw_succ < bw_pred) ? n - 1 : 1;
    int prev = root;
    parent[root] = -1;
    for (int i = 1; i < n; ++i) {
        int cur = ring[(k + i * step) % n];
        parent[cur] = prev;
        prev = cur;
    }
    return TOPO_OK;
}

/* Attach one node at a time over the widest free link (a parent takes two children at most);
 * among equal links the shallowest parent wins, so equal links give a balanced tree. */
static int tree_binary(const topo_t *topo, const int *team, int n, int root, int *parent)
{
    int *depth = malloc(sizeof(int) * (size_t) n * 2);
    int *nchild;
    if (NULL == depth) {
        return TOPO_ERR_NOMEM;
    }
    nchild = depth + n;
    for (int i = 0; i < n; ++i) {
        parent[i] = -2; /* not attached yet */
        nchild[i] = 0;
        depth[i] = 0;
    }
    parent[root] = -1;
    for (int step = 1; step < n; ++step) {
        int bu = -1, bv = -1;
        uint32_t bbw = 0;
        for (int v = 0; v < n; ++v) {
            if (-2 != parent[v]) {
                continue;
            }
            for (int u = 0; u < n; ++u) {
                if (-2 == parent[u] || nchild[u] >= 2) {
                    continue;
                }
                uint32_t bw = hop_bw(topo, team[u], team[v]);
                if (bu < 0 || bw > bbw || (bw == bbw && depth[u] < depth[bu])) {
                    bu = u;
                    bv = v;
                    bbw = bw;
                }
            }
        }
        parent[bv] = bu;
        depth[bv] = depth[bu] + 1;
        nchild[bu]++;
    }
    free(depth);
    return TOPO_OK;
}

int topo_tree(const topo_t *topo, const int *team, int n, int root, topo_tree_shape_t shape,
              const int *ring, int *parent)
{
    int rc = check_team(topo, team, n);
    int *own_ring = NULL;
    if (TOPO_OK != rc) {
        return rc;
    }
    if (NULL == parent || root < 0 || root >= n) {
        return TOPO_ERR_ARG;
    }
    if (TOPO_TREE_BINARY == shape) {
        return tree_binary(topo, team, n, root, parent);
    }
    if (TOPO_TREE_CHAIN != shape) {
        return TOPO_ERR_ARG;
    }
    if (NULL == ring) {
        own_ring = malloc(sizeof(int) * (size_t) n);
        if (NULL == own_ring) {
            return TOPO_ERR_NOMEM;
        }
        rc = topo_ring(topo, team, n, own_ring, NULL);
        ring = own_ring;
    }
    if (TOPO_OK == rc) {
        rc = tree_chain(topo, team, n, root, ring, parent);
    }
    free(own_ring);
    return rc;
}

int topo_tree_children(const int *parent, int n, int node, int *children, int max)
{
    int k = 0;
    for (int i = 0; i < n; ++i) {
        if (parent[i] == node && i != node) {
            if (k < max) {
                children[k] = i;
            }
            ++k;
        }
    }
    return (k < max) ? k : max;
}

/* Depth bounds the latency of a pipelined tree: the last chunk crosses depth links. */
int topo_tree_depth(const int *parent, int n)
{
    int deepest = 0;
    for (int i = 0; i < n; ++i) {
        int d = 0;
        /* bounded walk: a malformed parent array cannot loop forever */
        for (int p = parent[i]; p >= 0 && d <= n; p = parent[p]) {
            ++d;
        }
        deepest = (d > deepest) ? d : deepest;
    }
    return deepest;
}

/* ---- team summary ---------------------------------------------------------------------- */

/* MB/s as people read it in a warning: "450 GB/s", "19.2 GB/s". */
static void fmt_gbs(uint32_t mbs, char *buf, size_t len)
{
    if (0 == mbs % 1000) {
        snprintf(buf, len, "%u GB/s", mbs / 1000);
    } else {
        snprintf(buf, len, "%.1f GB/s", mbs / 1000.0);
    }
}

/* Append to a fixed buffer, truncating quietly (a warning is for people, not parsers). */
static void append(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;
    if (used + 1 >= len) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/*
 * Everything selection and the logs need about a team, in one pass over its distinct GPU
 * pairs: worst and best class, slowest pair, the ring's slowest hop, whether peer access holds
 * for all pairs and for the ring's hops, and a warning when the pairs differ in kind (NVLink
 * next to PCIe, or several PCIe classes) or when the P2P level refuses only some pairs.
 */
int topo_team_info(const topo_t *topo, const int *team, int n, const int *ring,
                   topo_p2p_level_t level, bool disable, topo_team_info_t *info)
{
    int rc = check_team(topo, team, n);
    int gpus[TOPO_MAX_GPUS];
    int d = 0, *own_ring = NULL;
    /* distinct labels among the pairs, with how many pairs carry each */
    char labels[TOPO_LINK_COUNT * 4][TOPO_LABEL_LEN];
    int label_count[TOPO_LINK_COUNT * 4];
    int nlabels = 0, refused = 0, npairs = 0;
    const topo_link_t *worst = NULL;

    if (TOPO_OK != rc) {
        return rc;
    }
    if (NULL == info) {
        return TOPO_ERR_ARG;
    }
    memset(info, 0, sizeof(*info));
    info->n = n;
    for (int i = 0; i < n; ++i) {
        int seen = 0;
        for (int j = 0; j < d; ++j) {
            seen |= (gpus[j] == team[i]);
        }
        if (!seen) {
            gpus[d++] = team[i];
        }
    }
    info->ngpus = d;
    info->worst = info->best = TOPO_LINK_X;
    info->slowest_bw = TOPO_BW_LOCAL;
    info->p2p_all = true;

    for (int i = 0; i < d; ++i) {
        for (int j = i + 1; j < d; ++j) {
            const topo_link_t *l = &topo->links[gpus[i]][gpus[j]];
            char lab[TOPO_LABEL_LEN];
            int f;
            ++npairs;
            if (NULL == worst || l->cls > worst->cls ||
                (l->cls == worst->cls && l->nvlinks < worst->nvlinks)) {
                worst = l;
            }
            if (1 == npairs || l->cls < info->best) {
                info->best = l->cls;
            }
            info->slowest_bw = (l->bw < info->slowest_bw) ? l->bw : info->slowest_bw;
            if (!topo_p2p_allowed(topo, gpus[i], gpus[j], level, disable, NULL)) {
                info->p2p_all = false;
                ++refused;
            }
            topo_link_label(l, lab);
            for (f = 0; f < nlabels && 0 != strcmp(labels[f], lab); ++f) {
            }
            if (f == nlabels && nlabels < (int) (sizeof(label_count) / sizeof(int))) {
                snprintf(labels[nlabels], TOPO_LABEL_LEN, "%s", lab);
                label_count[nlabels++] = 0;
            }
            if (f < nlabels) {
                label_count[f]++;
            }
        }
    }
    if (NULL != worst) {
        info->worst = worst->cls;
        info->nvlinks = worst->nvlinks;
        topo_link_label(worst, info->label);
    } else {
        snprintf(info->label, sizeof(info->label), "X");
    }

    if (NULL == ring) {
        own_ring = malloc(sizeof(int) * (size_t) n);
        if (NULL == own_ring) {
            return TOPO_ERR_NOMEM;
        }
        rc = topo_ring(topo, team, n, own_ring, NULL);
        if (TOPO_OK != rc) {
            free(own_ring);
            return rc;
        }
        ring = own_ring;
    }
    info->p2p_ring = true;
    info->ring_bw = TOPO_BW_LOCAL;
    for (int i = 0; i < n && n > 1; ++i) {
        int a = team[ring[i]], b = team[ring[(i + 1) % n]];
        uint32_t bw = hop_bw(topo, a, b);
        info->ring_bw = (bw < info->ring_bw) ? bw : info->ring_bw;
        if (!topo_p2p_allowed(topo, a, b, level, disable, NULL)) {
            info->p2p_ring = false;
        }
    }
    free(own_ring);

    info->mixed = (nlabels > 1);
    if (info->mixed) {
        char bw[32];
        fmt_gbs(info->ring_bw, bw, sizeof(bw));
        append(info->warning, sizeof(info->warning), "links are mixed in this team of %d GPUs:",
               d);
        for (int f = 0; f < nlabels; ++f) {
            append(info->warning, sizeof(info->warning), "%s %s (%d pair%s)", f ? "," : "",
                   labels[f], label_count[f], (1 == label_count[f]) ? "" : "s");
        }
        append(info->warning, sizeof(info->warning),
               "; collectives run at the slowest hop they use (the ring's is %s)", bw);
    }
    if (refused > 0 && refused < npairs) {
        append(info->warning, sizeof(info->warning),
               "%speer access is refused for %d of %d GPU pairs (coll_gpu_p2p_level %s%s)",
               ('\0' != info->warning[0]) ? "; " : "", refused, npairs,
               topo_p2p_level_name(level), disable ? ", coll_gpu_p2p_disable" : "");
    }
    return TOPO_OK;
}
