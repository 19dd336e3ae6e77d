//! TurboFlow ([DTA Table 2]: counters of evicted microflow records, Key-Increment by flow key).
