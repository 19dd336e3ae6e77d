//! What the sink's tests share.

use std::collections::HashMap;

use dta_int::{query, Buckets, Metric};

/// Samples by (switch, metric, bucket).
pub type Counts = HashMap<(u32, Metric, u16), u64>;

/// `hist`'s histogram of `m` at `node` (bucketed as the sink recorded it, which must be
/// `scheme`) holds exactly `truth`'s counts of that switch and metric.
pub fn assert_histogram(
    hist: &dta_store::Region,
    scheme: &Buckets,
    node: u32,
    m: Metric,
    truth: &Counts,
) {
    let h = query::histogram(hist, node, m, None, None).unwrap();
    assert_eq!(h.histogram.as_ref(), Some(scheme));
    let got: HashMap<u16, u64> = h
        .buckets
        .iter()
        .filter(|b| b.count > 0)
        .map(|b| (scheme.bucket(b.lo as u32), b.count))
        .collect();
    let want: HashMap<u16, u64> = truth
        .iter()
        .filter(|((n, mm, _), _)| *n == node && *mm == m)
        .map(|((_, _, b), c)| (*b, *c))
        .collect();
    assert_eq!(got, want, "node {node} {m:?}");
}
