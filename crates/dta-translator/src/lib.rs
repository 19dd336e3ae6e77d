//! dta-translator (being written).
