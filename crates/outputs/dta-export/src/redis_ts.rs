//! INT events and flow records into Redis, as the monitoring host of [INT-NIC] does (§III.D:
//! "the INT notifications ... are periodically flushed to the Redis database", time-stamped
//! "time-series data", §I). RedisTimeSeries (`TS.ADD`) is a module that stock Redis (Debian's
//! `redis-server`) lacks, so the time series are plain Redis structures:
//!
//! | key | type | written per point | read with |
//! | --- | --- | --- | --- |
//! | `{prefix}:stream:{measurement}` | stream | `XADD key MAXLEN ~ N * ts <ns> <tag> <v>.. <field>
//! <v>..` | `XRANGE`, `XREAD` |
//! | `{prefix}:ts:{measurement}:{series}` | sorted set | `ZADD key <ms> "<ns>:<field>:<value>"`
//! per numeric field | `ZRANGEBYSCORE key <from_ms> <to_ms>` |
//! | `{prefix}:series:{measurement}` | sorted set | `ZADD key <ms> {series}` (last seen) | `ZRANGE` |
//! | `{prefix}:latest:{measurement}:{series}` | hash | `HSET ts <ns> <field> <v>..` (the newest
//! point) | `HGETALL` |
//!
//! `{series}` is the point's tags sorted by key, `k=v` joined by `,` (empty with no tags). The
//! sorted set's score is the timestamp in milliseconds (a double holds it exactly); the member
//! carries the nanosecond timestamp and the field, so two points of one series in the same
//! millisecond stay distinct. A batch is one pipeline (one round trip).
//!
//! **Bounded**: a series (a flow, say) has two keys whatever its fields, each expiring
//! `key_ttl_s` after its last point (a flow that ended is forgotten); its samples older than
//! `retention_ms` before its newest are trimmed; the series index forgets series not seen for
//! the TTL; streams are capped (`MAXLEN ~`). So the keys are at most two per series seen in the
//! last TTL, plus one stream and one index per measurement.

use std::fmt::Write as _;

use redis::{Client, Connection};

use crate::record::Record;

#[derive(Debug, thiserror::Error)]
pub enum RedisExportError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("redis returned a malformed time series member {0:?}")]
    BadMember(String),
}

/// How points are laid out in Redis.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Key prefix (default `dta`).
    pub prefix: String,
    /// Approximate cap of each stream's length (`XADD MAXLEN ~`); 0: uncapped.
    pub stream_maxlen: u64,
    /// Drop time-series samples older than this many milliseconds before the newest; `None`:
    /// keep all (the TTL still forgets a series that stopped).
    pub retention_ms: Option<u64>,
    /// A series' keys expire this many seconds after its last point (and the series index
    /// forgets it); 0: never (the keys then grow with every flow ever seen).
    pub key_ttl_s: u64,
}

/// Default `key_ttl_s`: an hour.
pub const DEFAULT_KEY_TTL_S: u64 = 3600;

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "dta".into(),
            stream_maxlen: 1_000_000,
            retention_ms: Some(DEFAULT_KEY_TTL_S * 1000),
            key_ttl_s: DEFAULT_KEY_TTL_S,
        }
    }
}

/// Writes points into Redis over one connection.
pub struct RedisExporter {
    con: Connection,
    opts: RedisOptions,
    /// Points written.
    pub written: u64,
}

/// The `{series}` part of the keys: tags and the entity (a flow) sorted by key, `k=v` joined by
/// `,`: a series per flow, bounded by the keys' TTL.
pub fn series_name(r: &dyn Record) -> String {
    let mut tags = r.tags();
    tags.extend(r.entity());
    tags.sort_by(|a, b| a.0.cmp(b.0));
    let mut s = String::new();
    for (i, (k, v)) in tags.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{k}={v}");
    }
    s
}

impl RedisExporter {
    /// Connect to `url` (`redis://host:port/db`).
    pub fn connect(url: &str, opts: RedisOptions) -> Result<RedisExporter, RedisExportError> {
        let con = Client::open(url)?.get_connection()?;
        Ok(RedisExporter {
            con,
            opts,
            written: 0,
        })
    }

    pub fn options(&self) -> &RedisOptions {
        &self.opts
    }

    /// Key of one series' samples (every numeric field).
    pub fn ts_key(&self, measurement: &str, series: &str) -> String {
        format!("{}:ts:{measurement}:{series}", self.opts.prefix)
    }

    /// Key of a measurement's series index.
    pub fn series_key(&self, measurement: &str) -> String {
        format!("{}:series:{measurement}", self.opts.prefix)
    }

    /// Key of a measurement's stream.
    pub fn stream_key(&self, measurement: &str) -> String {
        format!("{}:stream:{measurement}", self.opts.prefix)
    }

    /// Key of the newest point of a series.
    pub fn latest_key(&self, measurement: &str, series: &str) -> String {
        format!("{}:latest:{measurement}:{series}", self.opts.prefix)
    }

    /// Write a batch of points in one pipeline.
    pub fn write_batch(&mut self, points: &[&dyn Record]) -> Result<(), RedisExportError> {
        if points.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for r in points {
            let m = r.measurement();
            let series = series_name(*r);
            let ts_ns = r.timestamp_ns();
            let ts_ms = ts_ns / 1_000_000;
            let tags = r.tags();
            let fields = r.fields();

            let xadd = pipe.cmd("XADD").arg(self.stream_key(m));
            if self.opts.stream_maxlen > 0 {
                xadd.arg("MAXLEN").arg("~").arg(self.opts.stream_maxlen);
            }
            xadd.arg("*").arg("ts").arg(ts_ns);
            for (k, v) in &tags {
                xadd.arg(*k).arg(v);
            }
            for (k, v) in &fields {
                xadd.arg(*k).arg(v.to_string());
            }
            xadd.ignore();

            let ttl = self.opts.key_ttl_s;
            pipe.cmd("ZADD")
                .arg(self.series_key(m))
                .arg(ts_ms)
                .arg(&series)
                .ignore();
            if ttl > 0 {
                pipe.cmd("ZREMRANGEBYSCORE")
                    .arg(self.series_key(m))
                    .arg("-inf")
                    .arg(format!("({}", ts_ms.saturating_sub(ttl * 1000)))
                    .ignore();
                pipe.cmd("EXPIRE").arg(self.series_key(m)).arg(ttl).ignore();
            }
            let latest = self.latest_key(m, &series);
            let hset = pipe.cmd("HSET").arg(&latest).arg("ts").arg(ts_ns);
            for (k, v) in &fields {
                hset.arg(*k).arg(v.to_string());
            }
            hset.ignore();
            if ttl > 0 {
                pipe.cmd("EXPIRE").arg(&latest).arg(ttl).ignore();
            }
            let key = self.ts_key(m, &series);
            let mut numeric = false;
            for (k, v) in &fields {
                if v.as_f64().is_none() {
                    continue;
                }
                numeric = true;
                pipe.cmd("ZADD")
                    .arg(&key)
                    .arg(ts_ms)
                    .arg(format!("{ts_ns}:{k}:{v}"))
                    .ignore();
            }
            if numeric {
                if let Some(ret) = self.opts.retention_ms {
                    pipe.cmd("ZREMRANGEBYSCORE")
                        .arg(&key)
                        .arg("-inf")
                        .arg(format!("({}", ts_ms.saturating_sub(ret)))
                        .ignore();
                }
                if ttl > 0 {
                    pipe.cmd("EXPIRE").arg(&key).arg(ttl).ignore();
                }
            }
        }
        pipe.query::<()>(&mut self.con)?;
        self.written += points.len() as u64;
        Ok(())
    }

    /// Write one point.
    pub fn write(&mut self, r: &dyn Record) -> Result<(), RedisExportError> {
        self.write_batch(&[r])
    }

    /// The samples `(timestamp_ns, value)` of one time series between two times (milliseconds,
    /// inclusive), oldest first.
    pub fn range(
        &mut self,
        measurement: &str,
        series: &str,
        field: &str,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<(u64, f64)>, RedisExportError> {
        let members: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(self.ts_key(measurement, series))
            .arg(from_ms)
            .arg(to_ms)
            .query(&mut self.con)?;
        let mut out = vec![];
        for m in members {
            let bad = || RedisExportError::BadMember(m.clone());
            let (t, rest) = m.split_once(':').ok_or_else(bad)?;
            // The value is last: a field name holds no ':' (they are identifiers).
            let (f, v) = rest.rsplit_once(':').ok_or_else(bad)?;
            if f != field {
                continue;
            }
            match (t.parse(), v.parse()) {
                (Ok(t), Ok(v)) => out.push((t, v)),
                _ => return Err(bad()),
            }
        }
        Ok(out)
    }

    /// The series names of a measurement seen within the TTL.
    pub fn series(&mut self, measurement: &str) -> Result<Vec<String>, RedisExportError> {
        let mut v: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.series_key(measurement))
            .arg(0)
            .arg(-1)
            .query(&mut self.con)?;
        v.sort();
        Ok(v)
    }

    /// The newest `count` stream entries of a measurement, newest first, each as its
    /// field/value pairs.
    pub fn recent(
        &mut self,
        measurement: &str,
        count: usize,
    ) -> Result<Vec<Vec<(String, String)>>, RedisExportError> {
        let reply: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
            .arg(self.stream_key(measurement))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(count)
            .query(&mut self.con)?;
        let mut out = Vec::new();
        for id in reply.ids {
            let mut kv = Vec::new();
            for (k, v) in id.map {
                let s: String = redis::from_redis_value(&v)?;
                kv.push((k, s));
            }
            kv.sort();
            out.push(kv);
        }
        Ok(out)
    }

    /// The newest point of a series as field/value pairs (with `ts`), sorted by name.
    pub fn latest(
        &mut self,
        measurement: &str,
        series: &str,
    ) -> Result<Vec<(String, String)>, RedisExportError> {
        let mut v: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(self.latest_key(measurement, series))
            .query(&mut self.con)?;
        v.sort();
        Ok(v)
    }

    /// The underlying connection, for anything else.
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.con
    }
}
