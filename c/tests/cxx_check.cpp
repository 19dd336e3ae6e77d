// Compile-only check: the header is valid C++ and usable without sockets.
#define DTA_NO_SOCKETS
#include "dta/reporter.h"

int dta_cxx_check(unsigned char *buf, unsigned long cap)
{
    dta_proto_header h = {DTA_PROTO_LONG, 1, 2, 1};
    return dta_proto_append(buf, cap, &h, 1, 2);
}
