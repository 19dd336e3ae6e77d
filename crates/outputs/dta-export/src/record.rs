//! What the exporters export: a timestamped point with a measurement name, tags (strings that
//! identify a series) and fields (the values). INT events and flow records from the INT sink
//! ([INT-NIC §III.C]: "switch ID, measurement value at that switch, bitmap indicating the event
//! type and the timestamp"; §III.B: a flow entry's packet count, last update and per-hop metrics)
//! become points through the [`Record`] trait, so the exporters do not depend on the sink's
//! types.

/// One field value, typed as InfluxDB line protocol and Redis carry it.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// A float (line protocol: plain number).
    Float(f64),
    /// A signed integer (line protocol: `i` suffix).
    Int(i64),
    /// An unsigned integer (line protocol: `u` suffix).
    UInt(u64),
    /// A boolean.
    Bool(bool),
    /// A string (line protocol: double-quoted).
    Str(String),
}

impl FieldValue {
    /// The value as a number, for time series that hold numbers only (`None` for strings).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            FieldValue::Float(v) => Some(*v),
            FieldValue::Int(v) => Some(*v as f64),
            FieldValue::UInt(v) => Some(*v as f64),
            FieldValue::Bool(v) => Some(f64::from(u8::from(*v))),
            FieldValue::Str(_) => None,
        }
    }
}

impl std::fmt::Display for FieldValue {
    /// The value as Redis stores it: numbers in their shortest form, booleans as 0/1.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldValue::Float(v) => write!(f, "{v}"),
            FieldValue::Int(v) => write!(f, "{v}"),
            FieldValue::UInt(v) => write!(f, "{v}"),
            FieldValue::Bool(v) => write!(f, "{}", u8::from(*v)),
            FieldValue::Str(s) => f.write_str(s),
        }
    }
}

impl From<f64> for FieldValue {
    fn from(v: f64) -> Self {
        FieldValue::Float(v)
    }
}
impl From<i64> for FieldValue {
    fn from(v: i64) -> Self {
        FieldValue::Int(v)
    }
}
impl From<u64> for FieldValue {
    fn from(v: u64) -> Self {
        FieldValue::UInt(v)
    }
}
impl From<u32> for FieldValue {
    fn from(v: u32) -> Self {
        FieldValue::UInt(u64::from(v))
    }
}
impl From<bool> for FieldValue {
    fn from(v: bool) -> Self {
        FieldValue::Bool(v)
    }
}
impl From<&str> for FieldValue {
    fn from(v: &str) -> Self {
        FieldValue::Str(v.to_owned())
    }
}
impl From<String> for FieldValue {
    fn from(v: String) -> Self {
        FieldValue::Str(v)
    }
}

/// Anything exportable as a point. The INT sink's event and flow record types implement it (or
/// are converted into a [`Point`]); tags identify the series (e.g. `switch`, `metric`, `kind`),
/// fields carry the values.
pub trait Record {
    /// The measurement (InfluxDB) / key prefix (Redis), e.g. `int_event` or `int_flow`.
    fn measurement(&self) -> &str;
    /// Tags, in any order (exporters sort them by key). Of bounded cardinality: values from a
    /// small set (a kind, a reason) or the network's size (a switch), never one per flow.
    fn tags(&self) -> Vec<(&str, String)>;
    /// What the point is about beyond its tags when that is unbounded (a flow): Redis makes it
    /// part of the series, whose keys expire; InfluxDB, which keeps every series' index for ever,
    /// gets it as a string field.
    fn entity(&self) -> Option<(&str, String)> {
        None
    }
    /// Fields; at least one.
    fn fields(&self) -> Vec<(&str, FieldValue)>;
    /// Nanoseconds since the Unix epoch.
    fn timestamp_ns(&self) -> u64;
}

/// A ready-made [`Record`].
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub measurement: String,
    pub tags: Vec<(String, String)>,
    pub entity: Option<(String, String)>,
    pub fields: Vec<(String, FieldValue)>,
    pub timestamp_ns: u64,
}

impl Point {
    pub fn new(measurement: impl Into<String>, timestamp_ns: u64) -> Point {
        Point {
            measurement: measurement.into(),
            tags: Vec::new(),
            entity: None,
            fields: Vec::new(),
            timestamp_ns,
        }
    }

    /// Set the entity (builder style).
    pub fn entity(mut self, k: impl Into<String>, v: impl Into<String>) -> Point {
        self.entity = Some((k.into(), v.into()));
        self
    }

    /// Add a tag (builder style).
    pub fn tag(mut self, k: impl Into<String>, v: impl Into<String>) -> Point {
        self.tags.push((k.into(), v.into()));
        self
    }

    /// Add a field (builder style).
    pub fn field(mut self, k: impl Into<String>, v: impl Into<FieldValue>) -> Point {
        self.fields.push((k.into(), v.into()));
        self
    }

    /// Copy any record into a point.
    pub fn from_record(r: &dyn Record) -> Point {
        Point {
            measurement: r.measurement().to_owned(),
            tags: r
                .tags()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            entity: r.entity().map(|(k, v)| (k.to_owned(), v)),
            fields: r
                .fields()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            timestamp_ns: r.timestamp_ns(),
        }
    }
}

impl Record for Point {
    fn measurement(&self) -> &str {
        &self.measurement
    }
    fn tags(&self) -> Vec<(&str, String)> {
        self.tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect()
    }
    fn entity(&self) -> Option<(&str, String)> {
        self.entity.as_ref().map(|(k, v)| (k.as_str(), v.clone()))
    }
    fn fields(&self) -> Vec<(&str, FieldValue)> {
        self.fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect()
    }
    fn timestamp_ns(&self) -> u64 {
        self.timestamp_ns
    }
}
