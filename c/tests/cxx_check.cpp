// Compile-only check: the header is valid C++ and usable without sockets.
#define DTA_NO_SOCKETS
#include "dta/reporter.h"
#include "dta/cluster.h"
#include "dta/dta.h"

int dta_cxx_check(unsigned char *buf, unsigned long cap)
{
    dta_proto_header h = {DTA_PROTO_LONG, 1, 2, 1};
    return dta_proto_append(buf, cap, &h, 1, 2);
}

int dta_cxx_cluster_check(const unsigned char *key, unsigned long len)
{
    static dta_cluster_map m;
    dta_cluster_init(&m);
    dta_cluster_add(&m, "c0", 0x7f000001u, 40040);
    return dta_cluster_owner(&m, key, len);
}

int dta_cxx_capi_check(unsigned char *buf, unsigned long cap)
{
    dta_header h = {1, 2, DTA_PRIORITY_HIGH, 0, 0};
    size_t len = 0;
    const unsigned char key[4] = {1, 2, 3, 4};
    return dta_encode_key_increment(&h, key, 4, 1, 2, buf, cap, &len);
}
