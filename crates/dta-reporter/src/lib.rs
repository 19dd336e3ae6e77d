//! dta-reporter (being written).
