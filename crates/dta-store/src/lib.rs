//! dta-store (being written).
