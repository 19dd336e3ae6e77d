//! dta-wire (being written).
