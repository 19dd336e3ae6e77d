/*
 * dta/cluster.h -- header-only routing of DTA reports over several collectors (C99).
 *
 * The cluster map (docs/scale-out.md) names the collectors; a report goes to the translator of
 * the collector owning its key. Key-Write, Key-Increment and Postcarding keys are placed by
 * rendezvous hashing (highest score wins, the first listed on a tie):
 *
 *     seed(name)    = fmix64(fnv1a64(name) ^ DTA_CLUSTER_SALT)
 *     score(key, c) = fmix64(fnv1a64(key) ^ seed(c))
 *
 * the same function as the Rust crate dta-cluster and the Python package, checked by all
 * three against spec/vectors/cluster.json. Append lists are placed by table.
 *
 * The map is passed in (dta_cluster_add) or parsed from the line format `dta cluster export`
 * writes:
 *
 *     # comment
 *     version 3
 *     collector NAME IPV4:PORT        -- in the map's order
 *     list STORE LIST_ID NAME         -- an Append list's collector
 *     default STORE NAME              -- the collector of the store's other lists
 *
 * Only the first Append store's table is kept (a translator holds one Append store).
 * No allocation: the map is a fixed-size struct.
 */
#ifndef DTA_CLUSTER_H
#define DTA_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DTA_CLUSTER_SALT 0xD6E8FEB86659FD93ULL
#define DTA_CLUSTER_MAX_COLLECTORS 256
#define DTA_CLUSTER_MAX_NAME 64
#define DTA_CLUSTER_MAX_LISTS 4096

/* Errors (negative). */
#define DTA_CLUSTER_ERR_FULL (-1)      /* more collectors or lists than the struct holds */
#define DTA_CLUSTER_ERR_NAME (-2)      /* a name empty, too long or duplicated */
#define DTA_CLUSTER_ERR_SYNTAX (-3)    /* a line of the map text is malformed */
#define DTA_CLUSTER_ERR_UNKNOWN (-4)   /* a list names a collector the map does not */
#define DTA_CLUSTER_ERR_EMPTY (-5)     /* no collector */
#define DTA_CLUSTER_ERR_UNASSIGNED (-6) /* an Append list in no table and no default */

struct dta_cluster_collector {
    char name[DTA_CLUSTER_MAX_NAME + 1];
    uint64_t seed;
    uint32_t ipv4;  /* host order */
    uint16_t port;
};

struct dta_cluster_list {
    uint32_t list_id;
    uint16_t collector;
};

struct dta_cluster_map {
    uint64_t version;
    size_t n;
    struct dta_cluster_collector c[DTA_CLUSTER_MAX_COLLECTORS];
    size_t n_lists;
    struct dta_cluster_list lists[DTA_CLUSTER_MAX_LISTS];
    int list_default; /* collector index, or -1 */
};

static inline uint64_t dta_cluster_fnv1a64(const uint8_t *b, size_t len)
{
    uint64_t h = 0xCBF29CE484222325ULL;
    size_t i;
    for (i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001B3ULL;
    }
    return h;
}

static inline uint64_t dta_cluster_fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ULL;
    k ^= k >> 33;
    return k;
}

static inline uint64_t dta_cluster_seed(const char *name)
{
    return dta_cluster_fmix64(dta_cluster_fnv1a64((const uint8_t *)name, strlen(name)) ^
                              DTA_CLUSTER_SALT);
}

static inline uint64_t dta_cluster_score(const uint8_t *key, size_t len, uint64_t seed)
{
    return dta_cluster_fmix64(dta_cluster_fnv1a64(key, len) ^ seed);
}

static inline void dta_cluster_init(struct dta_cluster_map *m)
{
    m->version = 0;
    m->n = 0;
    m->n_lists = 0;
    m->list_default = -1;
}

static inline int dta_cluster_find(const struct dta_cluster_map *m, const char *name)
{
    size_t i;
    for (i = 0; i < m->n; i++)
        if (strcmp(m->c[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Add a collector (in the map's order); its index, or an error. */
static inline int dta_cluster_add(struct dta_cluster_map *m, const char *name, uint32_t ipv4,
                                  uint16_t port)
{
    size_t len = strlen(name);
    if (m->n >= DTA_CLUSTER_MAX_COLLECTORS)
        return DTA_CLUSTER_ERR_FULL;
    if (len == 0 || len > DTA_CLUSTER_MAX_NAME || dta_cluster_find(m, name) >= 0)
        return DTA_CLUSTER_ERR_NAME;
    memcpy(m->c[m->n].name, name, len + 1);
    m->c[m->n].seed = dta_cluster_seed(name);
    m->c[m->n].ipv4 = ipv4;
    m->c[m->n].port = port;
    return (int)m->n++;
}

/* The collector index owning a Key-Write / Key-Increment / Postcarding key, or
 * DTA_CLUSTER_ERR_EMPTY. */
static inline int dta_cluster_owner(const struct dta_cluster_map *m, const uint8_t *key,
                                    size_t len)
{
    uint64_t h = dta_cluster_fnv1a64(key, len), best = 0;
    size_t i;
    int owner = DTA_CLUSTER_ERR_EMPTY;
    for (i = 0; i < m->n; i++) {
        uint64_t s = dta_cluster_fmix64(h ^ m->c[i].seed);
        if (owner < 0 || s > best) {
            best = s;
            owner = (int)i;
        }
    }
    return owner;
}

/* The collector index owning an Append list, or DTA_CLUSTER_ERR_UNASSIGNED. */
static inline int dta_cluster_list_owner(const struct dta_cluster_map *m, uint32_t list_id)
{
    size_t i;
    for (i = 0; i < m->n_lists; i++)
        if (m->lists[i].list_id == list_id)
            return m->lists[i].collector;
    return m->list_default >= 0 ? m->list_default : DTA_CLUSTER_ERR_UNASSIGNED;
}

static inline int dta__cluster_word(const char **p, const char *end, char *out, size_t cap)
{
    size_t n = 0;
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
    while (*p < end && **p != ' ' && **p != '\t' && **p != '\n' && **p != '\r') {
        if (n + 1 >= cap)
            return -1;
        out[n++] = **p;
        (*p)++;
    }
    out[n] = 0;
    return (int)n;
}

static inline int dta__cluster_u64(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (max - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static inline int dta__cluster_addr(const char *s, uint32_t *ip, uint16_t *port)
{
    uint64_t part[5];
    char buf[32];
    int i = 0;
    size_t len = strlen(s);
    if (len >= sizeof buf)
        return -1;
    memcpy(buf, s, len + 1);
    {
        char *tok = buf, *c;
        for (c = buf;; c++) {
            if (*c == '.' || *c == ':' || *c == 0) {
                char sep = *c;
                *c = 0;
                if (i >= 5 || dta__cluster_u64(tok, i < 4 ? 255 : 65535, &part[i]) < 0)
                    return -1;
                if ((i < 3 && sep != '.') || (i == 3 && sep != ':') || (i == 4 && sep != 0))
                    return -1;
                i++;
                if (sep == 0)
                    break;
                tok = c + 1;
            }
        }
    }
    if (i != 5)
        return -1;
    *ip = (uint32_t)(part[0] << 24 | part[1] << 16 | part[2] << 8 | part[3]);
    *port = (uint16_t)part[4];
    return 0;
}

/* Parse the line format above into m (initialised here). 0, or an error; *bad_line (if not
 * NULL) gets the 1-based line of the error. */
static inline int dta_cluster_parse(struct dta_cluster_map *m, const char *text, size_t len,
                                    size_t *bad_line)
{
    const char *p = text, *end = text + len;
    size_t line = 0;
    char append_store[DTA_CLUSTER_MAX_NAME + 1] = {0};
    dta_cluster_init(m);
    while (p < end) {
        char w[4][DTA_CLUSTER_MAX_NAME + 8];
        int k, rc = 0;
        line++;
        if (bad_line)
            *bad_line = line;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p < end && *p == '#') {
            while (p < end && *p != '\n')
                p++;
            if (p < end)
                p++;
            continue;
        }
        for (k = 0; k < 4; k++)
            if (dta__cluster_word(&p, end, w[k], sizeof w[k]) < 0)
                return DTA_CLUSTER_ERR_SYNTAX;
        {
            char extra[8];
            if (dta__cluster_word(&p, end, extra, sizeof extra) != 0)
                return DTA_CLUSTER_ERR_SYNTAX;
        }
        while (p < end && *p != '\n')
            p++;
        if (p < end)
            p++;
        if (w[0][0] == 0)
            continue;
        if (strcmp(w[0], "version") == 0 && w[1][0] && !w[2][0]) {
            if (dta__cluster_u64(w[1], UINT64_MAX, &m->version) < 0)
                return DTA_CLUSTER_ERR_SYNTAX;
        } else if (strcmp(w[0], "collector") == 0 && w[2][0] && !w[3][0]) {
            uint32_t ip;
            uint16_t port;
            if (dta__cluster_addr(w[2], &ip, &port) < 0)
                return DTA_CLUSTER_ERR_SYNTAX;
            if (strlen(w[1]) > DTA_CLUSTER_MAX_NAME)
                return DTA_CLUSTER_ERR_NAME;
            rc = dta_cluster_add(m, w[1], ip, port);
        } else if ((strcmp(w[0], "list") == 0 && w[3][0]) ||
                   (strcmp(w[0], "default") == 0 && w[2][0] && !w[3][0])) {
            int is_list = w[0][0] == 'l';
            const char *who = is_list ? w[3] : w[2];
            int c = dta_cluster_find(m, who);
            if (c < 0)
                return DTA_CLUSTER_ERR_UNKNOWN;
            if (!append_store[0] && strlen(w[1]) <= DTA_CLUSTER_MAX_NAME)
                memcpy(append_store, w[1], strlen(w[1]) + 1);
            if (strcmp(append_store, w[1]) != 0)
                continue; /* a second Append store: not kept */
            if (is_list) {
                uint64_t id;
                if (dta__cluster_u64(w[2], UINT32_MAX, &id) < 0)
                    return DTA_CLUSTER_ERR_SYNTAX;
                if (m->n_lists >= DTA_CLUSTER_MAX_LISTS)
                    return DTA_CLUSTER_ERR_FULL;
                m->lists[m->n_lists].list_id = (uint32_t)id;
                m->lists[m->n_lists].collector = (uint16_t)c;
                m->n_lists++;
            } else {
                m->list_default = c;
            }
        } else {
            return DTA_CLUSTER_ERR_SYNTAX;
        }
        if (rc < 0)
            return rc;
    }
    return m->n ? 0 : DTA_CLUSTER_ERR_EMPTY;
}

#ifdef __cplusplus
}
#endif

#endif /* DTA_CLUSTER_H */
