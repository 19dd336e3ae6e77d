/*
 * cluster_vector -- the header's rendezvous hashing and map parser for
 * c/tests/test_cluster_vectors.py, which compares the output with spec/vectors/cluster.json.
 *
 * Input lines:
 *   owner N NAME_1 .. NAME_N KEYHEX   -> "NAME SCORE_1 .. SCORE_N" (scores as 16 hex digits)
 *   map PATH                          -> parses the map file: "ok N" or "error RC LINE"
 *   key KEYHEX                        -> (after map) "NAME IPV4 PORT" of the key's owner
 *   list ID                           -> (after map) "NAME" of the list's owner, or "error RC"
 */
#include "dta/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct dta_cluster_map map;

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
    size_t n = strlen(h) / 2, i;
    if (n > cap)
        n = cap;
    for (i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1)
            exit(2);
        out[i] = (uint8_t)v;
    }
    return n;
}

int main(void)
{
    char cmd[16];
    while (scanf("%15s", cmd) == 1) {
        if (strcmp(cmd, "owner") == 0) {
            static struct dta_cluster_map m;
            int n, i;
            char name[80], hex[80];
            uint8_t key[40];
            size_t len;
            dta_cluster_init(&m);
            if (scanf("%d", &n) != 1)
                return 2;
            for (i = 0; i < n; i++) {
                if (scanf("%79s", name) != 1 || dta_cluster_add(&m, name, 0, 0) < 0)
                    return 2;
            }
            if (scanf("%79s", hex) != 1)
                return 2;
            len = unhex(hex, key, sizeof key);
            printf("%s", m.c[dta_cluster_owner(&m, key, len)].name);
            for (i = 0; i < n; i++)
                printf(" %016llx", (unsigned long long)dta_cluster_score(key, len, m.c[i].seed));
            printf("\n");
        } else if (strcmp(cmd, "map") == 0) {
            char path[512];
            static char text[1 << 16];
            size_t len, bad = 0;
            FILE *f;
            int rc;
            if (scanf("%511s", path) != 1 || !(f = fopen(path, "rb")))
                return 2;
            len = fread(text, 1, sizeof text, f);
            fclose(f);
            rc = dta_cluster_parse(&map, text, len, &bad);
            if (rc < 0)
                printf("error %d %zu\n", rc, bad);
            else
                printf("ok %zu\n", map.n);
        } else if (strcmp(cmd, "key") == 0) {
            char hex[80];
            uint8_t key[40];
            size_t len;
            int o;
            if (scanf("%79s", hex) != 1)
                return 2;
            len = unhex(hex, key, sizeof key);
            o = dta_cluster_owner(&map, key, len);
            if (o < 0)
                printf("error %d\n", o);
            else
                printf("%s %u %u\n", map.c[o].name, (unsigned)map.c[o].ipv4,
                       (unsigned)map.c[o].port);
        } else if (strcmp(cmd, "list") == 0) {
            unsigned long id;
            int o;
            if (scanf("%lu", &id) != 1)
                return 2;
            o = dta_cluster_list_owner(&map, (uint32_t)id);
            if (o < 0)
                printf("error %d\n", o);
            else
                printf("%s\n", map.c[o].name);
        } else {
            return 2;
        }
        fflush(stdout);
    }
    return 0;
}
