//! Bounds on the work one HTTP query may ask for, checked BEFORE any work is done: every query
//! parameter is parsed here, against its route's list of parameters and its limit. A parameter
//! out of bounds is a [`ParamError`] (400 with its message), never a clamp, an `empty` or a 0.
//! `docs/http.md` ("Limits") lists them.

use std::collections::HashMap;
use std::str::FromStr;

use dta_wire::MAX_REDUNDANCY;

/// Largest value set V = 0..values a Postcarding query may decode with: building the lookup
/// table costs `values` hash insertions and up to 36 bytes per value (a 2^20 table is ~38 MiB
/// and tens of milliseconds).
pub const MAX_POSTCARD_VALUES: u32 = 1 << 20;
/// Most entries one Append list query returns.
pub const MAX_LIST_ENTRIES: usize = 1 << 16;
/// Most entry bytes one Append list query returns (the answer is twice this in hex).
pub const MAX_LIST_BYTES: usize = 1 << 20;
/// Entries returned when `max` is not given.
pub const DEFAULT_LIST_MAX: usize = 1024;
/// Most parameters one request may carry (no route takes more than three).
pub const MAX_QUERY_PARAMS: usize = 8;
/// Heavy queries (Postcarding, Append lists, inspections, the store metrics) run off the async
/// executor, at most this many at once; more wait for a slot (within the request timeout), and
/// cheap queries (Key-Write, Key-Increment, Sketch-Merge, /healthz) never wait for them.
pub const MAX_HEAVY_QUERIES: usize = 2;

/// Why a request's parameters were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("unknown parameter `{name}`; this route takes: {allowed}")]
    Unknown { name: String, allowed: String },
    #[error("{count} parameters; at most {MAX_QUERY_PARAMS}")]
    TooMany { count: usize },
    #[error("missing `{0}`")]
    Missing(&'static str),
    #[error("bad value for `{name}`: {value:?}")]
    Malformed { name: &'static str, value: String },
    #[error("`{name}` = {value} is out of range: {range}")]
    OutOfRange {
        name: &'static str,
        value: u64,
        range: String,
    },
    #[error("`{name}`: {msg}")]
    Invalid { name: &'static str, msg: String },
}

/// A request's query parameters, checked against the names its route takes.
#[derive(Debug)]
pub struct Params<'a> {
    map: &'a HashMap<String, String>,
}

impl<'a> Params<'a> {
    pub fn new(map: &'a HashMap<String, String>, allowed: &[&str]) -> Result<Self, ParamError> {
        if map.len() > MAX_QUERY_PARAMS {
            return Err(ParamError::TooMany { count: map.len() });
        }
        if let Some(name) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            let allowed = if allowed.is_empty() {
                "none".to_owned()
            } else {
                allowed.join(", ")
            };
            return Err(ParamError::Unknown {
                name: name.chars().take(64).collect(),
                allowed,
            });
        }
        Ok(Params { map })
    }

    pub fn raw(&self, name: &'static str) -> Option<&'a str> {
        self.map.get(name).map(String::as_str)
    }

    fn parse<T: FromStr>(&self, name: &'static str) -> Result<Option<T>, ParamError> {
        self.raw(name)
            .map(|v| {
                v.parse().map_err(|_| ParamError::Malformed {
                    name,
                    value: v.chars().take(64).collect(),
                })
            })
            .transpose()
    }

    /// An integer parameter in `lo..=hi`, `default` when absent (`None`: required).
    pub fn bounded<T>(
        &self,
        name: &'static str,
        default: Option<T>,
        lo: T,
        hi: T,
    ) -> Result<T, ParamError>
    where
        T: FromStr + Into<u64> + PartialOrd + Copy + std::fmt::Display,
    {
        let v = match self.parse::<T>(name)? {
            Some(v) => v,
            None => default.ok_or(ParamError::Missing(name))?,
        };
        if v < lo || v > hi {
            return Err(ParamError::OutOfRange {
                name,
                value: v.into(),
                range: format!("{lo}..={hi}"),
            });
        }
        Ok(v)
    }

    /// An optional integer parameter: `None` when absent, else in `lo..=hi`.
    pub fn optional<T>(&self, name: &'static str, lo: T, hi: T) -> Result<Option<T>, ParamError>
    where
        T: FromStr + Into<u64> + PartialOrd + Copy + std::fmt::Display,
    {
        match self.raw(name) {
            None => Ok(None),
            Some(_) => self.bounded(name, None, lo, hi).map(Some),
        }
    }

    /// `redundancy`: absent means the store's N (from its region header); present must be
    /// 1..=[`MAX_REDUNDANCY`] (the store then checks it against its own N).
    pub fn redundancy(&self) -> Result<Option<u8>, ParamError> {
        self.optional("redundancy", 1, MAX_REDUNDANCY)
    }

    /// `list_base`: the first Append list of a layout of several (default 0).
    pub fn list_base(&self) -> Result<u32, ParamError> {
        Ok(self.bounded("list_base", Some(0), 0, u32::MAX as u64)? as u32)
    }

    /// `since_ms` (Unix milliseconds, optional) in nanoseconds.
    pub fn since_ns(&self) -> Result<Option<u64>, ParamError> {
        Ok(self
            .optional("since_ms", 0, u64::MAX / 1_000_000)?
            .map(|ms| ms * 1_000_000))
    }

    /// `window`: the time windows of a windowed Key-Increment store (`current`, `all`,
    /// `last:5m`, `at:UNIX_MS`; [`dta_store::WindowSel::parse`]); absent: the store's default.
    pub fn window(&self) -> Result<Option<dta_store::WindowSel>, ParamError> {
        self.raw("window")
            .map(|w| {
                dta_store::WindowSel::parse(w).map_err(|msg| ParamError::Invalid {
                    name: "window",
                    msg,
                })
            })
            .transpose()
    }

    /// `threshold`: 1..=`redundancy` (the wire's maximum when the store's N is used), default 1.
    pub fn threshold(&self, redundancy: Option<u8>) -> Result<u8, ParamError> {
        self.bounded(
            "threshold",
            Some(1),
            1,
            redundancy.unwrap_or(MAX_REDUNDANCY),
        )
    }

    /// `values`: 1..=[`MAX_POSTCARD_VALUES`]; `default` is the store's configured value set.
    pub fn postcard_values(&self, default: u32) -> Result<u32, ParamError> {
        self.bounded("values", Some(default), 1, MAX_POSTCARD_VALUES)
    }

    /// `max` entries of `entry_len` bytes: 1..=[`MAX_LIST_ENTRIES`] and at most
    /// [`MAX_LIST_BYTES`] in all, default [`DEFAULT_LIST_MAX`] (or fewer if entries are large).
    pub fn list_max(&self, entry_len: usize) -> Result<usize, ParamError> {
        let hi = MAX_LIST_ENTRIES
            .min(MAX_LIST_BYTES / entry_len.max(1))
            .max(1) as u64;
        let v = self.bounded("max", Some((DEFAULT_LIST_MAX as u64).min(hi)), 1, hi)?;
        Ok(v as usize)
    }

    /// An optional unbounded `u64` (a list position).
    pub fn opt_u64(&self, name: &'static str) -> Result<Option<u64>, ParamError> {
        self.parse(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kv: &[(&str, &str)]) -> HashMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_limit_is_a_named_error() {
        let m = map(&[("values", "4294967295")]);
        let p = Params::new(&m, &["key", "values"]).unwrap();
        assert!(matches!(
            p.postcard_values(1 << 18),
            Err(ParamError::OutOfRange { name: "values", .. })
        ));
        let m = map(&[("max", "18446744073709551615")]);
        let p = Params::new(&m, &["max"]).unwrap();
        assert!(matches!(
            p.list_max(8),
            Err(ParamError::OutOfRange { name: "max", .. })
        ));
        // Large entries lower the entry limit so the answer stays under MAX_LIST_BYTES.
        let m = map(&[("max", "65536")]);
        let p = Params::new(&m, &["max"]).unwrap();
        assert_eq!(p.list_max(16), Ok(65536));
        assert!(p.list_max(255).is_err());
        let m = map(&[]);
        let p = Params::new(&m, &["max"]).unwrap();
        assert_eq!(p.list_max(255), Ok(DEFAULT_LIST_MAX));
        let m = map(&[("redundancy", "9")]);
        let p = Params::new(&m, &["redundancy"]).unwrap();
        assert!(p.redundancy().is_err());
        let m = map(&[("redundancy", "0")]);
        assert!(Params::new(&m, &["redundancy"])
            .unwrap()
            .redundancy()
            .is_err());
        let m = map(&[("threshold", "3")]);
        assert!(Params::new(&m, &["threshold"])
            .unwrap()
            .threshold(Some(2))
            .is_err());
        // Absent: the store's N (None); threshold then bounded by the wire's maximum.
        let m = map(&[]);
        let p = Params::new(&m, &["redundancy", "threshold"]).unwrap();
        assert_eq!(p.redundancy(), Ok(None));
        assert_eq!(p.threshold(None), Ok(1));
        let m = map(&[("redundancy", "5")]);
        assert!(Params::new(&m, &["redundancy"])
            .unwrap()
            .redundancy()
            .is_err());
        let m = map(&[("count", "1")]);
        assert!(matches!(
            Params::new(&m, &["key"]),
            Err(ParamError::Unknown { .. })
        ));
        let many: Vec<(String, String)> = (0..=MAX_QUERY_PARAMS)
            .map(|i| (format!("p{i}"), String::new()))
            .collect();
        let m: HashMap<String, String> = many.into_iter().collect();
        assert!(matches!(
            Params::new(&m, &[]),
            Err(ParamError::TooMany { .. })
        ));
    }
}
