//! `dta decode`: print the fields of a DTA datagram, a RoCEv2 frame or an INT frame / telemetry
//! report, given either as a whole Ethernet frame or as a bare UDP payload. A frame is
//! recognised structurally (Ethernet II → IPv4 with a valid header checksum → UDP whose length
//! matches the IPv4 total length) and dispatched by its UDP destination port; a bare payload is
//! decoded only when exactly one protocol parses it. One protocol is never shown as another:
//! every output names the protocol (`decoded_as`) and the layer (`layer`: `frame` or
//! `payload`), and every failure is an error object with a message and exit status 1.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::{json, Map, Value};

use crate::HeaderFormat;
use dta_net::{ethernet, ipv4, udp};

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum DecodeAs {
    /// A frame is dispatched by UDP destination port; a payload must parse as exactly one
    /// protocol.
    Auto,
    /// A DTA datagram (either protocol), as a UDP payload or inside a frame.
    Dta,
    /// A RoCEv2 Ethernet frame (with its ICRC checked; the ICRC covers the IP header, so a bare
    /// payload cannot be checked and is refused).
    Roce,
    /// An Ethernet frame carrying INT (detected as the --int-* options say), or a telemetry
    /// report, as a UDP payload or inside a frame.
    Int,
    /// Only check that the bytes are an Ethernet/IPv4/UDP frame, then dispatch by port.
    Frame,
}

#[derive(Args)]
pub struct DecodeArgs {
    /// The bytes, in hex (spaces and colons allowed): an Ethernet/IPv4/UDP frame or a UDP
    /// payload of DTA, RoCEv2 (frame only) or a telemetry report; or an Ethernet frame with INT.
    #[arg(long)]
    hex: String,
    /// What the bytes are: auto (tried in turn), or as the value names.
    #[arg(long = "as", value_enum, default_value = "auto")]
    kind: DecodeAs,
    /// The prototype base header format to assume.
    #[arg(long, value_enum, default_value = "short")]
    prototype_header: HeaderFormat,
    /// INT over UDP: the destination port that announces the INT shim (also dispatches frames
    /// to this port to the INT decoder).
    #[arg(long)]
    int_udp_port: Option<u16>,
    /// INT detection by DSCP value (mask 0x3f).
    #[arg(long)]
    int_dscp: Option<u8>,
    /// INT detection by a 64-bit probe marker after the L4 header (hex or decimal).
    #[arg(long)]
    int_probe_marker: Option<String>,
    /// UDP destination port of telemetry reports (the INT sink's listening port).
    #[arg(long, default_value_t = dta_int_wire::REPORT_PORT)]
    int_report_port: u16,
}

/// The protocols `dta decode` knows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Proto {
    Dta,
    Roce,
    Int,
}

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Proto::Dta => "dta",
            Proto::Roce => "roce",
            Proto::Int => "int",
        }
    }
}

/// An Ethernet II / IPv4 / UDP frame: the UDP destination port and payload.
struct UdpFrame<'a> {
    dst_port: u16,
    payload: &'a [u8],
}

/// Recognise a whole Ethernet/IPv4/UDP frame: header checksum valid, UDP length equal to the
/// IPv4 payload length, trailing bytes only as Ethernet padding. The error says what is not.
fn udp_frame(b: &[u8]) -> Result<UdpFrame<'_>, String> {
    let eth = ethernet::Packet::new_checked(b).map_err(|_| "shorter than an Ethernet header")?;
    if eth.ethertype() != ethernet::ETHERTYPE_IPV4 {
        return Err(format!("EtherType {:#06x} is not IPv4", eth.ethertype()));
    }
    let ip = &b[ethernet::HEADER_LEN..];
    let (ipr, total) = ipv4::Repr::parse(ip).map_err(|e| format!("IPv4: {e}"))?;
    if ipr.protocol != dta_net::IPPROTO_UDP {
        return Err("IPv4: not a UDP datagram".to_owned());
    }
    let total = usize::from(total);
    if total < ipv4::HEADER_LEN + udp::HEADER_LEN || total > ip.len() {
        return Err(format!(
            "IPv4 total length {total} does not fit the {} bytes after Ethernet",
            ip.len()
        ));
    }
    let u = udp::Packet::new_checked(&ip[ipv4::HEADER_LEN..total])
        .map_err(|_| "shorter than a UDP header")?;
    if usize::from(u.len()) != total - ipv4::HEADER_LEN {
        return Err(format!(
            "UDP length {} does not match the IPv4 payload length {}",
            u.len(),
            total - ipv4::HEADER_LEN
        ));
    }
    Ok(UdpFrame {
        dst_port: u.dst_port(),
        payload: &ip[ipv4::HEADER_LEN + udp::HEADER_LEN..total],
    })
}

pub fn decode(a: DecodeArgs) -> anyhow::Result<ExitCode> {
    let clean: String = a
        .hex
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ':')
        .collect();
    let clean = clean.strip_prefix("0x").unwrap_or(&clean);
    let bytes = hex::decode(clean).context("--hex is not valid hex")?;
    let marker = match &a.int_probe_marker {
        Some(m) => Some(
            match m.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => m.parse(),
            }
            .context("--int-probe-marker: not a 64-bit integer")?,
        ),
        None => None,
    };
    let d = Decoder {
        fmt: match a.prototype_header {
            HeaderFormat::Short => dta_wire::prototype::BaseFormat::Short,
            HeaderFormat::Long => dta_wire::prototype::BaseFormat::Long,
        },
        detect: dta_int_wire::IntDetect {
            udp_port: a.int_udp_port,
            dscp: a.int_dscp.map(|d| (d, 0x3f)),
            probe_marker: marker,
        },
        report_port: a.int_report_port,
    };
    let (ok, v) = match d.run(&bytes, a.kind) {
        Ok(r) => r,
        Err(v) => (false, v),
    };
    let mut v = v;
    if let Value::Object(m) = &mut v {
        m.entry("length").or_insert(bytes.len().into());
    }
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

struct Decoder {
    fmt: dta_wire::prototype::BaseFormat,
    detect: dta_int_wire::IntDetect,
    report_port: u16,
}

/// `(success, output)` or an error object.
type Outcome = Result<(bool, Value), Value>;

fn error(reason: &str, message: String) -> Value {
    json!({"error": reason, "message": message})
}

fn tag(mut v: Value, proto: Proto, layer: &str) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert("decoded_as".into(), proto.name().into());
        m.insert("layer".into(), layer.into());
    }
    v
}

impl Decoder {
    fn run(&self, b: &[u8], kind: DecodeAs) -> Outcome {
        let frame = udp_frame(b);
        match (kind, frame) {
            (DecodeAs::Auto | DecodeAs::Frame, Ok(f)) => {
                let proto = self.by_port(f.dst_port).ok_or_else(|| {
                    error(
                        "unknown_port",
                        format!(
                            "an Ethernet/IPv4/UDP frame to UDP port {} (not DTA {}, RoCEv2 {}, \
                             telemetry reports {}{}); say what it carries with --as dta|roce|int",
                            f.dst_port,
                            dta_wire::DTA_PORT,
                            dta_roce::ROCE_PORT,
                            self.report_port,
                            self.detect
                                .udp_port
                                .map(|p| format!(", INT {p}"))
                                .unwrap_or_default()
                        ),
                    )
                })?;
                self.frame_as(b, &f, proto)
            }
            (DecodeAs::Frame, Err(why)) => Err(error(
                "not_a_frame",
                format!("not an Ethernet/IPv4/UDP frame: {why}"),
            )),
            (DecodeAs::Dta, Ok(f)) => self.frame_as(b, &f, Proto::Dta),
            (DecodeAs::Roce, Ok(f)) => self.frame_as(b, &f, Proto::Roce),
            (DecodeAs::Int, Ok(f)) => self.frame_as(b, &f, Proto::Int),
            (DecodeAs::Auto, Err(why)) => self.payload_auto(b, &why),
            (DecodeAs::Dta, Err(_)) => self.payload_as(b, Proto::Dta),
            (DecodeAs::Roce, Err(_)) => self.payload_as(b, Proto::Roce),
            (DecodeAs::Int, Err(_)) => self.payload_as(b, Proto::Int),
        }
    }

    fn by_port(&self, port: u16) -> Option<Proto> {
        if port == dta_wire::DTA_PORT {
            Some(Proto::Dta)
        } else if port == dta_roce::ROCE_PORT {
            Some(Proto::Roce)
        } else if port == self.report_port || self.detect.udp_port == Some(port) {
            Some(Proto::Int)
        } else {
            None
        }
    }

    /// A recognised frame decoded as `proto`: RoCEv2 and INT data packets from the whole frame,
    /// DTA and telemetry reports from the UDP payload.
    fn frame_as(&self, b: &[u8], f: &UdpFrame<'_>, proto: Proto) -> Outcome {
        let fail = |reason: &str, msg: String| {
            let mut e = error(reason, format!("{} frame: {msg}", proto.name()));
            if let Value::Object(m) = &mut e {
                m.insert("decoded_as".into(), proto.name().into());
                m.insert("layer".into(), "frame".into());
            }
            e
        };
        match proto {
            Proto::Roce => match dta_roce::FrameRepr::decode(b) {
                Ok(d) => Ok((d.icrc_valid, tag(dta_roce::to_json(&d), proto, "frame"))),
                Err(e) => Err(fail(e.reason(), e.to_string())),
            },
            Proto::Dta => match dta_wire::parse(f.payload, self.fmt) {
                Ok(d) => Ok((true, tag(dta_wire::to_json(&d), proto, "frame"))),
                Err(e) => Err(fail(e.reason(), e.to_string())),
            },
            Proto::Int => {
                if let Ok(Some(i)) = dta_int_wire::find_int(b, &self.detect) {
                    let d = dta_int_wire::Decoded::Int(i);
                    return Ok((
                        true,
                        tag(dta_int_wire::to_json(&d, &self.detect), proto, "frame"),
                    ));
                }
                match dta_int_wire::parse_report(f.payload) {
                    Ok(r) => {
                        let d = dta_int_wire::Decoded::Report(r);
                        Ok((
                            true,
                            tag(dta_int_wire::to_json(&d, &self.detect), proto, "frame"),
                        ))
                    }
                    Err(e) => Err(fail(e.reason(), e.to_string())),
                }
            }
        }
    }

    /// A bare payload (or, for INT, a frame the structural check refused, e.g. INT over TCP).
    fn payload_one(&self, b: &[u8], proto: Proto) -> Result<Value, (String, String)> {
        match proto {
            Proto::Dta => dta_wire::parse(b, self.fmt)
                .map(|d| tag(dta_wire::to_json(&d), proto, "payload"))
                .map_err(|e| (e.reason().to_owned(), e.to_string())),
            Proto::Roce => Err((
                "payload_not_supported".to_owned(),
                "RoCEv2 is decoded from a whole Ethernet frame (its ICRC covers the IP header)"
                    .to_owned(),
            )),
            Proto::Int => {
                if let Ok(Some(i)) = dta_int_wire::find_int(b, &self.detect) {
                    let d = dta_int_wire::Decoded::Int(i);
                    return Ok(tag(dta_int_wire::to_json(&d, &self.detect), proto, "frame"));
                }
                dta_int_wire::parse_report(b)
                    .map(|r| {
                        let d = dta_int_wire::Decoded::Report(r);
                        tag(dta_int_wire::to_json(&d, &self.detect), proto, "payload")
                    })
                    .map_err(|e| (e.reason().to_owned(), e.to_string()))
            }
        }
    }

    fn payload_as(&self, b: &[u8], proto: Proto) -> Outcome {
        self.payload_one(b, proto)
            .map(|v| (true, v))
            .map_err(|(reason, msg)| {
                let mut e = error(&reason, format!("{} payload: {msg}", proto.name()));
                if let Value::Object(m) = &mut e {
                    m.insert("decoded_as".into(), proto.name().into());
                    m.insert("layer".into(), "payload".into());
                }
                e
            })
    }

    fn payload_auto(&self, b: &[u8], not_frame: &str) -> Outcome {
        let mut tried = Map::new();
        tried.insert("frame".into(), not_frame.into());
        let mut found = Vec::new();
        for proto in [Proto::Dta, Proto::Int] {
            match self.payload_one(b, proto) {
                Ok(v) => found.push((proto, v)),
                Err((reason, _)) => {
                    tried.insert(proto.name().into(), reason.into());
                }
            }
        }
        match found.len() {
            1 => Ok((true, found.pop().expect("one").1)),
            0 => Err(json!({
                "error": "undecodable",
                "message": format!(
                    "not an Ethernet/IPv4/UDP frame ({not_frame}) and no protocol parses it as a \
                     UDP payload; say what it is with --as dta|roce|int|frame"
                ),
                "tried": tried,
            })),
            _ => {
                let names: Vec<&str> = found.iter().map(|(p, _)| p.name()).collect();
                Err(json!({
                    "error": "ambiguous",
                    "message": format!(
                        "the payload parses as {}; choose one with --as",
                        names.join(" and ")
                    ),
                    "candidates": names,
                }))
            }
        }
    }
}
