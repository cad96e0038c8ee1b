/*
 * topo_file.c - dump and load the node model in the line-oriented text format of
 * topo/FORMAT.md.
 *
 * Serves coll_gpu_topo_file (load a model instead of probing: fixtures, machines whose probe
 * is wrong), coll_gpu_topo_dump_file (write what the probe saw), the coll_gpu_topo tool and
 * the unit tests.  A dump followed by a load gives back the same model, and a second dump is
 * byte-identical to the first: integers only, a fixed order, unknown values left out.
 *
 * The loader is strict on purpose: a hand-written file with a typo must fail with its line
 * number rather than quietly describe another machine.
 */
#include "topo.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_FILE_VERSION 1
#define MAX_TOKENS 32
#define MAX_LINE 4096

/* ---- dump ------------------------------------------------------------------------------ */

/* MB/s -> "450" or "24.5" (GB/s, at most three decimals, no trailing zeros). */
static const char *fmt_thousandths(uint32_t v, char *buf, size_t len)
{
    if (0 == v % 1000) {
        snprintf(buf, len, "%u", v / 1000);
    } else {
        snprintf(buf, len, "%u.%03u", v / 1000, v % 1000);
        char *end = buf + strlen(buf) - 1;
        while ('0' == *end) {
            *end-- = '\0';
        }
    }
    return buf;
}

/* p2p= and atomics= values; the dump leaves unknown (-1) out, so "unknown" is only read. */
static const char *tri_name(int v)
{
    return (v > 0) ? "yes" : (0 == v) ? "no" : "unknown";
}

/* The class token of a link: "NV18", "NVS18", "PIX"... (FORMAT.md, "link"). */
static const char *class_token(const topo_link_t *l, char *buf, size_t len)
{
    if (TOPO_LINK_NVL == l->cls) {
        snprintf(buf, len, "NV%d", l->nvlinks);
    } else if (TOPO_LINK_NVS == l->cls) {
        snprintf(buf, len, "NVS%d", l->nvlinks);
    } else {
        snprintf(buf, len, "%s", topo_link_class_name(l->cls));
    }
    return buf;
}

/*
 * Write the model in FORMAT.md's record order: header, host, source, numa, gpu, nic, link
 * (every pair once, lower index first), nicpath, end.  Unknown values are left out rather
 * than written as sentinels, so that a hand-edited dump stays readable and a load followed by
 * a dump reproduces the same bytes.
 */
int topo_dump(const topo_t *topo, FILE *out)
{
    char a[32], b[32], uuid[TOPO_UUID_STRLEN];
    if (NULL == topo || NULL == out) {
        return TOPO_ERR_ARG;
    }
    fprintf(out, "# coll/gpu node topology; format: topo/FORMAT.md\n");
    fprintf(out, "coll_gpu_topo %d\n", TOPO_FILE_VERSION);
    if ('\0' != topo->host[0]) {
        fprintf(out, "host %s\n", topo->host);
    }
    if ('\0' != topo->source[0]) {
        fprintf(out, "source \"%s\"\n", topo->source);
    }
    for (int i = 0; i < topo->nnuma; ++i) {
        const topo_numa_t *n = &topo->numa[i];
        fprintf(out, "numa %d", n->os_index);
        if (n->package >= 0) {
            fprintf(out, " package=%d", n->package);
        }
        if ('\0' != n->cpus[0]) {
            fprintf(out, " cpus=%s", n->cpus);
        }
        fprintf(out, "\n");
    }
    for (int i = 0; i < topo->ngpus; ++i) {
        const topo_gpu_t *g = &topo->gpus[i];
        topo_uuid_format(g->uuid, uuid);
        fprintf(out, "gpu %d uuid=%s bus=%s", i, uuid, g->bus_id);
        if ('\0' != g->name[0]) {
            fprintf(out, " name=\"%s\"", g->name);
        }
        if (g->numa >= 0) {
            fprintf(out, " numa=%d", g->numa);
        }
        if ('\0' != g->cpus[0]) {
            fprintf(out, " cpus=%s", g->cpus);
        }
        if (g->sm > 0) {
            fprintf(out, " sm=%d", g->sm);
        }
        if (g->pcie_gen > 0 || g->pcie_width > 0) {
            fprintf(out, " pcie=%dx%d", g->pcie_gen, g->pcie_width);
        }
        if (g->nvswitch_links > 0) {
            fprintf(out, " nvswitch=%d", g->nvswitch_links);
        }
        if (0 != g->nvlink_bw) {
            fprintf(out, " nvlink_bw=%s", fmt_thousandths(g->nvlink_bw, a, sizeof(a)));
        }
        fprintf(out, "\n");
    }
    for (int i = 0; i < topo->nnics; ++i) {
        const topo_nic_t *n = &topo->nics[i];
        fprintf(out, "nic %d name=%s kind=%s", i, n->name, topo_nic_kind_name(n->kind));
        if ('\0' != n->bus_id[0]) {
            fprintf(out, " bus=%s", n->bus_id);
        }
        if ('\0' != n->netdev[0]) {
            fprintf(out, " netdev=%s", n->netdev);
        }
        if (n->numa >= 0) {
            fprintf(out, " numa=%d", n->numa);
        }
        if (0 != n->speed) {
            fprintf(out, " speed=%s", fmt_thousandths(n->speed, a, sizeof(a)));
        }
        fprintf(out, "\n");
    }
    for (int i = 0; i < topo->ngpus; ++i) {
        for (int j = i + 1; j < topo->ngpus; ++j) {
            const topo_link_t *l = &topo->links[i][j];
            fprintf(out, "link %d %d %s bw=%s", i, j, class_token(l, a, sizeof(a)),
                    fmt_thousandths(l->bw, b, sizeof(b)));
            if (l->p2p >= 0) {
                fprintf(out, " p2p=%s", tri_name(l->p2p));
            }
            if (l->atomics >= 0) {
                fprintf(out, " atomics=%s", tri_name(l->atomics));
            }
            if (l->perf_rank >= 0) {
                fprintf(out, " rank=%d", l->perf_rank);
            }
            fprintf(out, "\n");
        }
    }
    for (int i = 0; i < topo->ngpus; ++i) {
        for (int k = 0; k < topo->nnics; ++k) {
            fprintf(out, "nicpath %d %d %s\n", i, k, topo_link_class_name(topo->gpu_nic[i][k]));
        }
    }
    fprintf(out, "end\n");
    return ferror(out) ? TOPO_ERR_IO : TOPO_OK;
}

int topo_dump_file(const topo_t *topo, const char *path, char *err, size_t errlen)
{
    FILE *f;
    int rc;
    if (NULL == topo || NULL == path) {
        return TOPO_ERR_ARG;
    }
    f = fopen(path, "w");
    if (NULL == f) {
        if (NULL != err) {
            snprintf(err, errlen, "%s: cannot open for writing: %s", path, strerror(errno));
        }
        return TOPO_ERR_IO;
    }
    rc = topo_dump(topo, f);
    if (0 != fclose(f) && TOPO_OK == rc) {
        rc = TOPO_ERR_IO;
    }
    if (TOPO_OK != rc && NULL != err) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
    }
    return rc;
}

/* open_memstream keeps one writer (topo_dump) for files and strings alike. */
int topo_dump_string(const topo_t *topo, char **text)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    int rc;
    if (NULL == topo || NULL == text) {
        return TOPO_ERR_ARG;
    }
    f = open_memstream(&buf, &len);
    if (NULL == f) {
        return TOPO_ERR_NOMEM;
    }
    rc = topo_dump(topo, f);
    if (0 != fclose(f) && TOPO_OK == rc) {
        rc = TOPO_ERR_NOMEM;
    }
    if (TOPO_OK != rc) {
        free(buf);
        return rc;
    }
    *text = buf;
    return TOPO_OK;
}

/* ---- load ------------------------------------------------------------------------------ */

typedef struct {
    const char *name; /* file name for messages */
    int line;
    char *err;
    size_t errlen;
} parse_ctx_t;

/* One token of a record line: a positional word (key NULL) or key=value. */
typedef struct {
    char *key;
    char *val;
} token_t;

/* Record the first error as "NAME:LINE: message"; returns TOPO_ERR_PARSE to pass up. */
static int fail(parse_ctx_t *ctx, const char *fmt, ...)
{
    va_list ap;
    if (NULL != ctx->err && ctx->errlen > 0) {
        int w = snprintf(ctx->err, ctx->errlen, "%s:%d: ", ctx->name, ctx->line);
        if (w >= 0 && (size_t) w < ctx->errlen) {
            va_start(ap, fmt);
            vsnprintf(ctx->err + w, ctx->errlen - (size_t) w, fmt, ap);
            va_end(ap);
        }
    }
    return TOPO_ERR_PARSE;
}

/*
 * Split a line in place.  Words are separated by blanks; '#' outside quotes starts a comment;
 * a value may be double-quoted (no escapes, no embedded quote).  Returns the token count or a
 * negative error.
 */
static int tokenize(parse_ctx_t *ctx, char *s, token_t *tok, int max)
{
    int n = 0;
    for (;;) {
        while (' ' == *s || '\t' == *s || '\r' == *s) {
            ++s;
        }
        if ('\0' == *s || '#' == *s) {
            return n;
        }
        if (n == max) {
            return fail(ctx, "too many words on one line (at most %d)", max);
        }
        char *start = s;
        char *eq = NULL;
        while ('\0' != *s && ' ' != *s && '\t' != *s && '\r' != *s && '#' != *s) {
            if ('=' == *s && NULL == eq) {
                eq = s;
            }
            if ('"' == *s) {
                char *close = strchr(s + 1, '"');
                if (NULL == close) {
                    return fail(ctx, "unterminated quote");
                }
                s = close;
            }
            ++s;
        }
        if ('\0' != *s && '#' != *s) {
            *s++ = '\0';
        } else if ('#' == *s) {
            /* a comment glued to a word: end the word, then stop at the comment */
            *s = '\0';
            s = (char *) "";
        }
        if (NULL != eq) {
            *eq = '\0';
            tok[n].key = start;
            tok[n].val = eq + 1;
            if ('\0' == start[0]) {
                return fail(ctx, "'=%s' has no key", eq + 1);
            }
        } else {
            tok[n].key = NULL;
            tok[n].val = start;
        }
        /* strip the quotes of a quoted value; they must enclose the whole value */
        char *v = tok[n].val;
        size_t vl = strlen(v);
        if ('"' == v[0]) {
            if (vl < 2 || '"' != v[vl - 1]) {
                return fail(ctx, "a quoted value must end with its closing quote");
            }
            v[vl - 1] = '\0';
            tok[n].val = v + 1;
        } else if (NULL != strchr(v, '"')) {
            return fail(ctx, "stray quote in '%s'", v);
        }
        ++n;
    }
}

/* A whole-word decimal integer in [min, max]: "9O" or "12abc" are errors, not 9 or 12. */
static int parse_int(parse_ctx_t *ctx, const char *what, const char *s, long min, long max,
                     long *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if ('\0' == *s || '\0' != *end || 0 != errno || v < min || v > max) {
        return fail(ctx, "%s: '%s' is not an integer in [%ld, %ld]", what, s, min, max);
    }
    *out = v;
    return TOPO_OK;
}

/* "24.5" -> 24500: a decimal with at most three fraction digits, exact. */
static int parse_thousandths(parse_ctx_t *ctx, const char *what, const char *s, uint32_t *out)
{
    uint64_t v = 0;
    int frac = -1;
    const char *p = s;
    if ('\0' == *p) {
        return fail(ctx, "%s: empty value", what);
    }
    for (; '\0' != *p; ++p) {
        if ('.' == *p && frac < 0 && p != s) {
            frac = 0;
            continue;
        }
        if (!isdigit((unsigned char) *p) || 3 == frac) {
            return fail(ctx, "%s: '%s' is not a number with at most 3 decimals", what, s);
        }
        v = v * 10 + (uint64_t) (*p - '0');
        if (frac >= 0) {
            ++frac;
        }
        if (v > UINT32_MAX) {
            return fail(ctx, "%s: '%s' is too large", what, s);
        }
    }
    for (int f = (frac < 0) ? 0 : frac; f < 3; ++f) {
        v *= 10;
    }
    if (v > UINT32_MAX || 0 == frac) {
        return fail(ctx, "%s: '%s' is not a valid number", what, s);
    }
    *out = (uint32_t) v;
    return TOPO_OK;
}

static int parse_tri(parse_ctx_t *ctx, const char *what, const char *s, int8_t *out)
{
    if (0 == strcmp(s, "yes")) {
        *out = 1;
    } else if (0 == strcmp(s, "no")) {
        *out = 0;
    } else if (0 == strcmp(s, "unknown")) {
        *out = -1;
    } else {
        return fail(ctx, "%s: '%s' must be yes, no or unknown", what, s);
    }
    return TOPO_OK;
}

/* A word that is printed bare in a dump: no blanks, quotes, '#' or '='. */
static int parse_word(parse_ctx_t *ctx, const char *what, const char *s, char *out, size_t len)
{
    if ('\0' == *s) {
        return fail(ctx, "%s: empty value", what);
    }
    for (const char *p = s; '\0' != *p; ++p) {
        if (!isgraph((unsigned char) *p) || '"' == *p || '#' == *p || '=' == *p) {
            return fail(ctx, "%s: '%s' may not contain blanks, quotes, '#' or '='", what, s);
        }
    }
    if (strlen(s) >= len) {
        return fail(ctx, "%s: '%s' is too long (at most %zu characters)", what, s, len - 1);
    }
    snprintf(out, len, "%s", s);
    return TOPO_OK;
}

/* Free text (a quoted value): printable characters only, so a dump stays one line. */
static int parse_text(parse_ctx_t *ctx, const char *what, const char *s, char *out, size_t len)
{
    for (const char *p = s; '\0' != *p; ++p) {
        if (!isprint((unsigned char) *p)) {
            return fail(ctx, "%s: control character in the text", what);
        }
    }
    if (strlen(s) >= len) {
        return fail(ctx, "%s: text is too long (at most %zu characters)", what, len - 1);
    }
    snprintf(out, len, "%s", s);
    return TOPO_OK;
}

/* hwloc's list syntax: "0-55,112-167". */
static int parse_cpus(parse_ctx_t *ctx, const char *s, char *out, size_t len)
{
    const char *p = s;
    while ('\0' != *p) {
        if (!isdigit((unsigned char) *p)) {
            return fail(ctx, "cpus: '%s' is not a CPU list like 0-55,112-167", s);
        }
        while (isdigit((unsigned char) *p)) {
            ++p;
        }
        if ('-' == *p) {
            ++p;
            if (!isdigit((unsigned char) *p)) {
                return fail(ctx, "cpus: '%s' is not a CPU list like 0-55,112-167", s);
            }
            while (isdigit((unsigned char) *p)) {
                ++p;
            }
        }
        if (',' == *p && '\0' != p[1]) {
            ++p;
        } else if ('\0' != *p) {
            return fail(ctx, "cpus: '%s' is not a CPU list like 0-55,112-167", s);
        }
    }
    return parse_word(ctx, "cpus", s, out, len);
}

static int parse_bus(parse_ctx_t *ctx, const char *s, char *out, size_t len)
{
    if (TOPO_OK != topo_bus_id_normalize(s, out, len)) {
        return fail(ctx, "bus: '%s' is not a PCI bus id like 0000:3b:00.0", s);
    }
    return TOPO_OK;
}

/* "NV18", "NVS", "NVS18", "PIX", "PXB", "PHB", "SYS" (not "X": a pair is two GPUs). */
static int parse_class(parse_ctx_t *ctx, const char *s, topo_link_class_t *cls, int *nvlinks)
{
    long n = 0;
    int c;
    *nvlinks = 0;
    if (0 == strncmp(s, "NVS", 3)) {
        *cls = TOPO_LINK_NVS;
        if ('\0' != s[3] && TOPO_OK != parse_int(ctx, "NVS link count", s + 3, 1, 1024, &n)) {
            return TOPO_ERR_PARSE;
        }
        *nvlinks = (int) n;
        return TOPO_OK;
    }
    if (0 == strncmp(s, "NV", 2)) {
        *cls = TOPO_LINK_NVL;
        if (TOPO_OK != parse_int(ctx, "NVLink count", s + 2, 1, 1024, &n)) {
            return TOPO_ERR_PARSE;
        }
        *nvlinks = (int) n;
        return TOPO_OK;
    }
    c = topo_link_class_from_name(s);
    if (c < TOPO_LINK_PIX || 0 != strcmp(s, topo_link_class_name((topo_link_class_t) c))) {
        return fail(ctx, "'%s' is not a link class (NV<n>, NVS[<n>], PIX, PXB, PHB, SYS)", s);
    }
    *cls = (topo_link_class_t) c;
    return TOPO_OK;
}

/* State of one load: what has been seen, for the completeness checks at "end". */
typedef struct {
    topo_t *topo;
    bool header, ended;
    bool link_seen[TOPO_MAX_GPUS][TOPO_MAX_GPUS];
    bool bw_given[TOPO_MAX_GPUS][TOPO_MAX_GPUS];
    bool nicpath_seen[TOPO_MAX_GPUS][TOPO_MAX_NICS];
} load_state_t;

/* A record is its name, exactly npos positional values, then unique key=value words. */
static int expect_positional(parse_ctx_t *ctx, const char *rec, token_t *tok, int ntok,
                             int npos)
{
    for (int i = 1; i <= npos; ++i) {
        if (i >= ntok || NULL != tok[i].key) {
            return fail(ctx, "%s: expected %d positional value%s", rec, npos,
                        (1 == npos) ? "" : "s");
        }
    }
    for (int i = npos + 1; i < ntok; ++i) {
        if (NULL == tok[i].key) {
            return fail(ctx, "%s: unexpected word '%s'", rec, tok[i].val);
        }
        for (int j = npos + 1; j < i; ++j) {
            if (0 == strcmp(tok[i].key, tok[j].key)) {
                return fail(ctx, "%s: '%s' given twice", rec, tok[i].key);
            }
        }
    }
    return TOPO_OK;
}

/* NUMA nodes are named by OS index (as numactl and hwloc name them), not by line order. */
static int numa_known(const topo_t *topo, int os_index)
{
    for (int i = 0; i < topo->nnuma; ++i) {
        if (topo->numa[i].os_index == os_index) {
            return 1;
        }
    }
    return 0;
}

static int parse_numa(parse_ctx_t *ctx, load_state_t *st, token_t *tok, int ntok)
{
    topo_t *topo = st->topo;
    topo_numa_t *n;
    long v;
    if (TOPO_OK != expect_positional(ctx, "numa", tok, ntok, 1)) {
        return TOPO_ERR_PARSE;
    }
    if (TOPO_MAX_NUMA == topo->nnuma) {
        return fail(ctx, "numa: more than %d NUMA nodes", TOPO_MAX_NUMA);
    }
    if (TOPO_OK != parse_int(ctx, "numa", tok[1].val, 0, 1 << 20, &v)) {
        return TOPO_ERR_PARSE;
    }
    if (numa_known(topo, (int) v)) {
        return fail(ctx, "numa %ld defined twice", v);
    }
    n = &topo->numa[topo->nnuma];
    n->os_index = (int) v;
    n->package = -1;
    for (int i = 2; i < ntok; ++i) {
        if (0 == strcmp(tok[i].key, "package")) {
            if (TOPO_OK != parse_int(ctx, "package", tok[i].val, 0, 1 << 20, &v)) {
                return TOPO_ERR_PARSE;
            }
            n->package = (int) v;
        } else if (0 == strcmp(tok[i].key, "cpus")) {
            if (TOPO_OK != parse_cpus(ctx, tok[i].val, n->cpus, sizeof(n->cpus))) {
                return TOPO_ERR_PARSE;
            }
        } else {
            return fail(ctx, "numa: unknown key '%s'", tok[i].key);
        }
    }
    topo->nnuma++;
    return TOPO_OK;
}

/* "gpu N uuid=... bus=... [name= numa= cpus= sm= pcie= nvswitch= nvlink_bw=]".  UUID and
 * bus id identify a GPU, so both are required and must be unique in the file. */
static int parse_gpu(parse_ctx_t *ctx, load_state_t *st, token_t *tok, int ntok)
{
    topo_t *topo = st->topo;
    topo_gpu_t *g;
    bool have_uuid = false, have_bus = false;
    long v;
    if (TOPO_OK != expect_positional(ctx, "gpu", tok, ntok, 1)) {
        return TOPO_ERR_PARSE;
    }
    if (TOPO_OK != parse_int(ctx, "gpu", tok[1].val, 0, TOPO_MAX_GPUS - 1, &v)) {
        return TOPO_ERR_PARSE;
    }
    /* numbered in order so that "gpu 3" in a link always means the fourth gpu line */
    if (v != topo->ngpus) {
        return fail(ctx, "gpu %ld: expected gpu %d (gpus are numbered 0, 1, ... in order)", v,
                    topo->ngpus);
    }
    g = &topo->gpus[topo->ngpus];
    for (int i = 2; i < ntok; ++i) {
        const char *k = tok[i].key, *val = tok[i].val;
        int rc = TOPO_OK;
        if (0 == strcmp(k, "uuid")) {
            if (TOPO_OK != topo_uuid_parse(val, g->uuid) || 0 != strncmp(val, "GPU-", 4)) {
                return fail(ctx, "uuid: '%s' is not GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", val);
            }
            have_uuid = true;
        } else if (0 == strcmp(k, "bus")) {
            rc = parse_bus(ctx, val, g->bus_id, sizeof(g->bus_id));
            have_bus = true;
        } else if (0 == strcmp(k, "name")) {
            rc = parse_text(ctx, "name", val, g->name, sizeof(g->name));
        } else if (0 == strcmp(k, "numa")) {
            rc = parse_int(ctx, "numa", val, 0, 1 << 20, &v);
            g->numa = (int) v;
            if (TOPO_OK == rc && topo->nnuma > 0 && !numa_known(topo, g->numa)) {
                return fail(ctx, "gpu: numa %d is not defined by a numa line above", g->numa);
            }
        } else if (0 == strcmp(k, "cpus")) {
            rc = parse_cpus(ctx, val, g->cpus, sizeof(g->cpus));
        } else if (0 == strcmp(k, "sm")) {
            rc = parse_int(ctx, "sm", val, 1, 10000, &v);
            g->sm = (int) v;
        } else if (0 == strcmp(k, "pcie")) {
            int gen, width;
            char tail;
            if (2 != sscanf(val, "%dx%d%c", &gen, &width, &tail) || gen < 0 || gen > 16 ||
                width < 0 || width > 64) {
                return fail(ctx, "pcie: '%s' is not GENxWIDTH like 5x16", val);
            }
            g->pcie_gen = gen;
            g->pcie_width = width;
        } else if (0 == strcmp(k, "nvswitch")) {
            rc = parse_int(ctx, "nvswitch", val, 0, 1024, &v);
            g->nvswitch_links = (int) v;
        } else if (0 == strcmp(k, "nvlink_bw")) {
            rc = parse_thousandths(ctx, "nvlink_bw", val, &g->nvlink_bw);
        } else {
            return fail(ctx, "gpu: unknown key '%s'", k);
        }
        if (TOPO_OK != rc) {
            return rc;
        }
    }
    if (!have_uuid || !have_bus) {
        return fail(ctx, "gpu %d: uuid= and bus= are required", topo->ngpus);
    }
    for (int i = 0; i < topo->ngpus; ++i) {
        if (0 == memcmp(topo->gpus[i].uuid, g->uuid, TOPO_UUID_BYTES)) {
            return fail(ctx, "gpu %d has the uuid of gpu %d", topo->ngpus, i);
        }
        if (0 == strcmp(topo->gpus[i].bus_id, g->bus_id)) {
            return fail(ctx, "gpu %d has the bus id of gpu %d", topo->ngpus, i);
        }
    }
    topo->ngpus++;
    return TOPO_OK;
}

/* "nic N name=... kind=ib|roce|eth [bus= netdev= numa= speed=]". */
static int parse_nic(parse_ctx_t *ctx, load_state_t *st, token_t *tok, int ntok)
{
    topo_t *topo = st->topo;
    topo_nic_t *n;
    bool have_name = false, have_kind = false;
    long v;
    if (TOPO_OK != expect_positional(ctx, "nic", tok, ntok, 1)) {
        return TOPO_ERR_PARSE;
    }
    if (TOPO_OK != parse_int(ctx, "nic", tok[1].val, 0, TOPO_MAX_NICS - 1, &v)) {
        return TOPO_ERR_PARSE;
    }
    if (v != topo->nnics) {
        return fail(ctx, "nic %ld: expected nic %d (nics are numbered 0, 1, ... in order)", v,
                    topo->nnics);
    }
    n = &topo->nics[topo->nnics];
    for (int i = 2; i < ntok; ++i) {
        const char *k = tok[i].key, *val = tok[i].val;
        int rc = TOPO_OK;
        if (0 == strcmp(k, "name")) {
            rc = parse_word(ctx, "name", val, n->name, sizeof(n->name));
            have_name = true;
        } else if (0 == strcmp(k, "kind")) {
            int kind = topo_nic_kind_from_name(val);
            if (kind < 0 || 0 != strcmp(val, topo_nic_kind_name((topo_nic_kind_t) kind))) {
                return fail(ctx, "kind: '%s' must be ib, roce or eth", val);
            }
            n->kind = (topo_nic_kind_t) kind;
            have_kind = true;
        } else if (0 == strcmp(k, "bus")) {
            rc = parse_bus(ctx, val, n->bus_id, sizeof(n->bus_id));
        } else if (0 == strcmp(k, "netdev")) {
            rc = parse_word(ctx, "netdev", val, n->netdev, sizeof(n->netdev));
        } else if (0 == strcmp(k, "numa")) {
            rc = parse_int(ctx, "numa", val, 0, 1 << 20, &v);
            n->numa = (int) v;
            if (TOPO_OK == rc && topo->nnuma > 0 && !numa_known(topo, n->numa)) {
                return fail(ctx, "nic: numa %d is not defined by a numa line above", n->numa);
            }
        } else if (0 == strcmp(k, "speed")) {
            rc = parse_thousandths(ctx, "speed", val, &n->speed);
        } else {
            return fail(ctx, "nic: unknown key '%s'", k);
        }
        if (TOPO_OK != rc) {
            return rc;
        }
    }
    if (!have_name || !have_kind) {
        return fail(ctx, "nic %d: name= and kind= are required", topo->nnics);
    }
    topo->nnics++;
    return TOPO_OK;
}

/* "link A B CLASS [bw= p2p= atomics= rank=]": sets both directions of the pair. */
static int parse_link(parse_ctx_t *ctx, load_state_t *st, token_t *tok, int ntok)
{
    topo_t *topo = st->topo;
    topo_link_class_t cls = TOPO_LINK_SYS;
    int nvlinks = 0;
    long a, b;
    uint32_t bw = 0;
    int8_t p2p = -1, atomics = -1, rank = -1;
    long v;
    if (TOPO_OK != expect_positional(ctx, "link", tok, ntok, 3)) {
        return TOPO_ERR_PARSE;
    }
    if (TOPO_OK != parse_int(ctx, "link", tok[1].val, 0, TOPO_MAX_GPUS - 1, &a) ||
        TOPO_OK != parse_int(ctx, "link", tok[2].val, 0, TOPO_MAX_GPUS - 1, &b)) {
        return TOPO_ERR_PARSE;
    }
    if (a >= topo->ngpus || b >= topo->ngpus) {
        return fail(ctx, "link %ld %ld: gpu %ld is not defined above", a, b,
                    (a >= topo->ngpus) ? a : b);
    }
    if (a == b) {
        return fail(ctx, "link %ld %ld: a link joins two different gpus", a, b);
    }
    if (st->link_seen[a][b]) {
        return fail(ctx, "link %ld %ld given twice", a, b);
    }
    if (TOPO_OK != parse_class(ctx, tok[3].val, &cls, &nvlinks)) {
        return TOPO_ERR_PARSE;
    }
    for (int i = 4; i < ntok; ++i) {
        const char *k = tok[i].key, *val = tok[i].val;
        int rc;
        if (0 == strcmp(k, "bw")) {
            rc = parse_thousandths(ctx, "bw", val, &bw);
            if (TOPO_OK == rc && 0 == bw) {
                rc = fail(ctx, "bw: must be more than 0");
            }
        } else if (0 == strcmp(k, "p2p")) {
            rc = parse_tri(ctx, "p2p", val, &p2p);
        } else if (0 == strcmp(k, "atomics")) {
            rc = parse_tri(ctx, "atomics", val, &atomics);
        } else if (0 == strcmp(k, "rank")) {
            rc = parse_int(ctx, "rank", val, 0, 127, &v);
            rank = (int8_t) v;
        } else {
            return fail(ctx, "link: unknown key '%s'", k);
        }
        if (TOPO_OK != rc) {
            return rc;
        }
    }
    /* the default bandwidth needs both GPUs' properties: filled in at "end" */
    topo->links[a][b].cls = topo->links[b][a].cls = cls;
    topo->links[a][b].nvlinks = topo->links[b][a].nvlinks = nvlinks;
    topo->links[a][b].bw = topo->links[b][a].bw = bw;
    topo->links[a][b].p2p = topo->links[b][a].p2p = p2p;
    topo->links[a][b].atomics = topo->links[b][a].atomics = atomics;
    topo->links[a][b].perf_rank = topo->links[b][a].perf_rank = rank;
    st->link_seen[a][b] = st->link_seen[b][a] = true;
    st->bw_given[a][b] = st->bw_given[b][a] = (0 != bw);
    return TOPO_OK;
}

/* "nicpath G N CLASS": the PCIe distance from GPU G to NIC N. */
static int parse_nicpath(parse_ctx_t *ctx, load_state_t *st, token_t *tok, int ntok)
{
    topo_t *topo = st->topo;
    long g, k;
    int c;
    if (TOPO_OK != expect_positional(ctx, "nicpath", tok, ntok, 3)) {
        return TOPO_ERR_PARSE;
    }
    if (ntok > 4) {
        return fail(ctx, "nicpath: unknown key '%s'", tok[4].key);
    }
    if (TOPO_OK != parse_int(ctx, "nicpath gpu", tok[1].val, 0, TOPO_MAX_GPUS - 1, &g) ||
        TOPO_OK != parse_int(ctx, "nicpath nic", tok[2].val, 0, TOPO_MAX_NICS - 1, &k)) {
        return TOPO_ERR_PARSE;
    }
    if (g >= topo->ngpus) {
        return fail(ctx, "nicpath: gpu %ld is not defined above", g);
    }
    if (k >= topo->nnics) {
        return fail(ctx, "nicpath: nic %ld is not defined above", k);
    }
    if (st->nicpath_seen[g][k]) {
        return fail(ctx, "nicpath %ld %ld given twice", g, k);
    }
    /* a NIC hangs off PCIe: only the PCIe classes apply */
    c = topo_link_class_from_name(tok[3].val);
    if (c < TOPO_LINK_PIX || 0 != strcmp(tok[3].val, topo_link_class_name((topo_link_class_t) c))) {
        return fail(ctx, "nicpath: '%s' must be PIX, PXB, PHB or SYS", tok[3].val);
    }
    topo->gpu_nic[g][k] = (topo_link_class_t) c;
    st->nicpath_seen[g][k] = true;
    return TOPO_OK;
}

/* At "end": every pair must be described, and missing bandwidths get their defaults. */
static int finish(parse_ctx_t *ctx, load_state_t *st)
{
    topo_t *topo = st->topo;
    for (int a = 0; a < topo->ngpus; ++a) {
        for (int b = a + 1; b < topo->ngpus; ++b) {
            if (!st->link_seen[a][b]) {
                return fail(ctx, "no link line for gpus %d and %d (every pair needs one)", a, b);
            }
            if (TOPO_LINK_NVS == topo->links[a][b].cls && 0 == topo->links[a][b].nvlinks) {
                int na = topo->gpus[a].nvswitch_links, nb = topo->gpus[b].nvswitch_links;
                if (0 == na || 0 == nb) {
                    return fail(ctx, "link %d %d is NVS but gpu %d has no nvswitch= links", a, b,
                                (0 == na) ? a : b);
                }
                topo->links[a][b].nvlinks = topo->links[b][a].nvlinks = (na < nb) ? na : nb;
            }
            if (!st->bw_given[a][b]) {
                uint32_t bw = topo_default_link_bw(topo, a, b);
                topo->links[a][b].bw = topo->links[b][a].bw = bw;
            }
        }
        for (int k = 0; k < topo->nnics; ++k) {
            if (!st->nicpath_seen[a][k]) {
                return fail(ctx, "no nicpath line for gpu %d and nic %d (every pair needs one)",
                            a, k);
            }
        }
    }
    return TOPO_OK;
}

/* One line: the header must come first, nothing may follow "end", and each record name
 * dispatches to its parser.  Returns TOPO_OK for blank and comment lines. */
static int load_line(parse_ctx_t *ctx, load_state_t *st, char *line)
{
    token_t tok[MAX_TOKENS];
    int ntok = tokenize(ctx, line, tok, MAX_TOKENS);
    const char *rec;
    if (ntok <= 0) {
        return ntok; /* blank or comment (0), or the tokenizer's error */
    }
    if (NULL != tok[0].key) {
        return fail(ctx, "a line starts with a record name, not '%s='", tok[0].key);
    }
    rec = tok[0].val;
    if (st->ended) {
        return fail(ctx, "'%s' after end", rec);
    }
    if (!st->header) {
        long v;
        if (0 != strcmp(rec, "coll_gpu_topo") || 2 != ntok || NULL != tok[1].key) {
            return fail(ctx, "not a coll/gpu topology file: the first line must be "
                        "'coll_gpu_topo %d'", TOPO_FILE_VERSION);
        }
        if (TOPO_OK != parse_int(ctx, "version", tok[1].val, 0, 1000000, &v)) {
            return TOPO_ERR_PARSE;
        }
        if (TOPO_FILE_VERSION != v) {
            return fail(ctx, "format version %ld is not supported (this build reads %d)", v,
                        TOPO_FILE_VERSION);
        }
        st->header = true;
        return TOPO_OK;
    }
    if (0 == strcmp(rec, "host")) {
        if (TOPO_OK != expect_positional(ctx, "host", tok, ntok, 1) || ntok > 2) {
            return fail(ctx, "host: expected one name");
        }
        return parse_word(ctx, "host", tok[1].val, st->topo->host, sizeof(st->topo->host));
    }
    if (0 == strcmp(rec, "source")) {
        if (2 != ntok || NULL != tok[1].key) {
            return fail(ctx, "source: expected one quoted text");
        }
        return parse_text(ctx, "source", tok[1].val, st->topo->source, sizeof(st->topo->source));
    }
    if (0 == strcmp(rec, "numa")) {
        return parse_numa(ctx, st, tok, ntok);
    }
    if (0 == strcmp(rec, "gpu")) {
        return parse_gpu(ctx, st, tok, ntok);
    }
    if (0 == strcmp(rec, "nic")) {
        return parse_nic(ctx, st, tok, ntok);
    }
    if (0 == strcmp(rec, "link")) {
        return parse_link(ctx, st, tok, ntok);
    }
    if (0 == strcmp(rec, "nicpath")) {
        return parse_nicpath(ctx, st, tok, ntok);
    }
    if (0 == strcmp(rec, "end")) {
        if (1 != ntok) {
            return fail(ctx, "end: takes nothing");
        }
        st->ended = true;
        return finish(ctx, st);
    }
    return fail(ctx, "unknown record '%s'", rec);
}

/*
 * Parse a whole model; the input is not modified (each line is copied out to be tokenized in
 * place).  On any error nothing is returned: a half-loaded model would describe a machine that
 * does not exist.  The load state is on the heap because its pair tables are large.
 */
int topo_load_string(const char *text, const char *name, topo_t **out, char *err, size_t errlen)
{
    parse_ctx_t ctx = {(NULL != name) ? name : "(string)", 0, err, errlen};
    load_state_t *st;
    char line[MAX_LINE + 2];
    const char *p = text;
    int rc = TOPO_OK;

    if (NULL == out) {
        return TOPO_ERR_ARG;
    }
    *out = NULL;
    if (NULL == text) {
        return TOPO_ERR_ARG;
    }
    if (NULL != err && errlen > 0) {
        err[0] = '\0';
    }
    st = calloc(1, sizeof(*st));
    if (NULL == st) {
        return TOPO_ERR_NOMEM;
    }
    st->topo = topo_new();
    if (NULL == st->topo) {
        free(st);
        return TOPO_ERR_NOMEM;
    }
    while ('\0' != *p && TOPO_OK == rc) {
        const char *nl = strchr(p, '\n');
        size_t len = (NULL != nl) ? (size_t) (nl - p) : strlen(p);
        ++ctx.line;
        if (len > MAX_LINE) {
            rc = fail(&ctx, "line longer than %d characters", MAX_LINE);
            break;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        rc = load_line(&ctx, st, line);
        p += len + ((NULL != nl) ? 1 : 0);
    }
    if (TOPO_OK == rc && !st->ended) {
        /* a file cut short (a crashed dump, a partial copy) must not load as a smaller node */
        ctx.line = (0 == ctx.line) ? 1 : ctx.line;
        rc = fail(&ctx, st->header ? "missing 'end' (the file is incomplete)"
                                   : "empty file: no 'coll_gpu_topo' header");
    }
    if (TOPO_OK == rc) {
        *out = st->topo;
    } else {
        topo_free(st->topo);
    }
    free(st);
    return rc;
}

/* Read the file whole, refuse binary content, then parse it as a string named by its path. */
int topo_load_file(const char *path, topo_t **out, char *err, size_t errlen)
{
    FILE *f;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc;
    if (NULL == out) {
        return TOPO_ERR_ARG;
    }
    *out = NULL;
    if (NULL == path) {
        return TOPO_ERR_ARG;
    }
    f = fopen(path, "r");
    if (NULL == f) {
        if (NULL != err) {
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        }
        return TOPO_ERR_IO;
    }
    for (;;) {
        if (cap - len < 4096) {
            /* topology files are small; a runaway input stops at 64 MiB */
            char *nb = (cap > (64u << 20)) ? NULL : realloc(buf, cap + 65536);
            if (NULL == nb) {
                free(buf);
                fclose(f);
                if (NULL != err) {
                    snprintf(err, errlen, "%s: too large or out of memory", path);
                }
                return TOPO_ERR_NOMEM;
            }
            buf = nb;
            cap += 65536;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (0 == got) {
            break;
        }
    }
    if (ferror(f)) {
        free(buf);
        fclose(f);
        if (NULL != err) {
            snprintf(err, errlen, "%s: read error", path);
        }
        return TOPO_ERR_IO;
    }
    fclose(f);
    buf[len] = '\0';
    if (strlen(buf) != len) {
        free(buf);
        if (NULL != err) {
            snprintf(err, errlen, "%s: NUL byte in the file (not a text file)", path);
        }
        return TOPO_ERR_PARSE;
    }
    rc = topo_load_string(buf, path, out, err, errlen);
    free(buf);
    return rc;
}
