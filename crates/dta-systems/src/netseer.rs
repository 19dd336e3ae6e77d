//! NetSeer ([DTA Table 2]: loss events appended to a network-wide list).
