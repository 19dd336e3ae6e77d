//! Flow-size workloads: the measured data-center flow-size CDFs of `shared/workloads/` (FB
//! Hadoop, web search), heavy-tailed, as the load generator, the INT trace generator and the
//! monitoring systems' synthetic traces draw from them.

use std::path::Path;

use rand::Rng;
use serde::{Deserialize, Serialize};

const FB_HADOOP: &str = include_str!("../workloads/fb_hadoop_flow_size_cdf.txt");
const WEBSEARCH: &str = include_str!("../workloads/websearch_flow_size_cdf.txt");

/// The names [`FlowSizeCdf::builtin`] knows.
pub const BUILTIN_WORKLOADS: [&str; 2] = ["fb_hadoop", "websearch"];

/// A flow-size distribution: a piecewise-linear CDF over bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSizeCdf {
    /// `(size in bytes, cumulative fraction 0..=1)`, both non-decreasing, ending at 1.
    pub points: Vec<(f64, f64)>,
}

/// Why a CDF does not load.
#[derive(Debug, thiserror::Error)]
pub enum CdfError {
    /// The file cannot be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A line that is not `<size bytes> <cumulative percent>` (its number).
    #[error("line {0}: expected `<size bytes> <cumulative percent>`")]
    Syntax(usize),
    /// Points that decrease, start below 0 or do not end at 100 %.
    #[error("the CDF must be non-decreasing, start at or above 0 and end at 100%")]
    Shape,
}

impl FlowSizeCdf {
    /// Parse the `shared/workloads` format: one `<size bytes> <cumulative percent>` per line
    /// (`#` comments and blank lines skipped).
    pub fn parse(text: &str) -> Result<FlowSizeCdf, CdfError> {
        let mut points = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_whitespace();
            let (Some(s), Some(p), None) = (it.next(), it.next(), it.next()) else {
                return Err(CdfError::Syntax(i + 1));
            };
            let (s, p): (f64, f64) = match (s.parse(), p.parse()) {
                (Ok(s), Ok(p)) => (s, p),
                _ => return Err(CdfError::Syntax(i + 1)),
            };
            points.push((s, p / 100.0));
        }
        let ok = !points.is_empty()
            && points
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1)
            && points[0].0 >= 0.0
            && points[0].1 >= 0.0
            && (points.last().unwrap().1 - 1.0).abs() < 1e-9;
        if !ok {
            return Err(CdfError::Shape);
        }
        Ok(FlowSizeCdf { points })
    }

    /// [`FlowSizeCdf::parse`] of the file at `path`.
    pub fn load(path: &Path) -> Result<FlowSizeCdf, CdfError> {
        FlowSizeCdf::parse(&std::fs::read_to_string(path)?)
    }

    /// A built-in workload by name: `fb_hadoop` (Roy et al., SIGCOMM 2015, the FB_Hadoop
    /// workload of [InvisiFlow]) or `websearch` (Alizadeh et al., DCTCP, SIGCOMM 2010); copies of
    /// `shared/workloads/*_flow_size_cdf.txt`.
    pub fn builtin(name: &str) -> Option<FlowSizeCdf> {
        let text = match name {
            "fb_hadoop" => FB_HADOOP,
            "websearch" => WEBSEARCH,
            _ => return None,
        };
        Some(FlowSizeCdf::parse(text).expect("built-in CDFs are valid"))
    }

    /// `name` as a built-in workload, else as a file in the `shared/workloads` format.
    pub fn by_name_or_path(name: &str) -> Result<FlowSizeCdf, CdfError> {
        match FlowSizeCdf::builtin(name) {
            Some(c) => Ok(c),
            None => FlowSizeCdf::load(Path::new(name)),
        }
    }

    /// The size at cumulative fraction `u` (inverse CDF, linear between points).
    pub fn quantile(&self, u: f64) -> f64 {
        let p = &self.points;
        if u <= p[0].1 {
            return p[0].0;
        }
        for w in p.windows(2) {
            let ((s0, c0), (s1, c1)) = (w[0], w[1]);
            if u <= c1 {
                if c1 <= c0 {
                    return s1;
                }
                return s0 + (s1 - s0) * (u - c0) / (c1 - c0);
            }
        }
        p.last().unwrap().0
    }

    /// Draw a flow size in bytes (at least 1).
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        (self.quantile(rng.gen::<f64>()).round() as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const FB: &str = "0 0\n100 1\n200 2\n300 5\n350 15\n400 20\n500 30\n600 40\n700 50\n1000 60\n2000 67\n7000 70\n30000 72\n50000 82\n80000 87\n120000 90\n300000 95\n1000000 97.5\n2000000 99\n10000000 100\n";

    #[test]
    fn cdf_parse_and_quantiles() {
        let c = FlowSizeCdf::parse(FB).unwrap();
        assert_eq!(FlowSizeCdf::builtin("fb_hadoop").unwrap(), c);
        let ws = FlowSizeCdf::by_name_or_path("websearch").unwrap();
        assert_eq!(ws.quantile(0.5), 50_000.0 + 30_000.0 * 10.0 / 13.0);
        assert!(FlowSizeCdf::by_name_or_path("/nonexistent/cdf.txt").is_err());
        assert_eq!(c.points.len(), 20);
        assert_eq!(c.quantile(0.0), 0.0);
        assert_eq!(c.quantile(0.5), 700.0);
        assert_eq!(c.quantile(0.65), 1000.0 + 1000.0 * 5.0 / 7.0);
        assert_eq!(c.quantile(1.0), 10_000_000.0);
        assert!(matches!(
            FlowSizeCdf::parse("1 50\n2 40\n"),
            Err(CdfError::Shape)
        ));
        assert!(matches!(
            FlowSizeCdf::parse("1 50\n2 90\n"),
            Err(CdfError::Shape)
        ));
        assert!(matches!(
            FlowSizeCdf::parse("1 50 3\n"),
            Err(CdfError::Syntax(1))
        ));
    }

    #[test]
    fn sizes_follow_the_cdf() {
        // The empirical median and 90th percentile of 20 000 draws sit at the CDF's.
        let c = FlowSizeCdf::parse(FB).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut v: Vec<u64> = (0..20_000).map(|_| c.sample(&mut rng)).collect();
        v.sort_unstable();
        let med = v[10_000] as f64;
        let p90 = v[18_000] as f64;
        assert!((650.0..760.0).contains(&med), "median {med}");
        assert!((100_000.0..140_000.0).contains(&p90), "p90 {p90}");
    }
}
