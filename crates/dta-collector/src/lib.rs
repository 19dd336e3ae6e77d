//! dta-collector (being written).
