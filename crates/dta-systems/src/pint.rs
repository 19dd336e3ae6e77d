//! PINT ([DTA Table 2]: per-flow 1-byte values, Key-Write with redundancy as compression).
