//! The generated INT trace as pcap (nanosecond timestamps, Ethernet link type), and its replay
//! into a translator over UDP.
//!
//! Two ways to write a trace ([`PcapFormat`]):
//! - `frames`: each record is the INT-MD frame as the INT sink switch sees it (Ethernet / IPv4 /
//!   UDP to the INT port, shim, INT-MD header, 5-hop stack, payload): what a capture at the sink
//!   holds, and what `tcpdump`/Wireshark show as INT.
//! - `reports`: each record is the telemetry report v2.0 that sink sends to the collector
//!   (Ethernet / IPv4 / UDP to the report port, then a group header from the sink switch and one
//!   individual report, RepType 0, InType 3, Report Length 0xFF, carrying the whole frame).
//!
//! Replay sends one UDP datagram per record. A translator receives datagrams, not frames, so an
//! INT frame cannot be sent as it is: replay **wraps INT frames in telemetry reports v2.0**
//! exactly as the `reports` format stores them (the sink's node id is the newest hop's, the
//! sequence number counts frames), and sends **the UDP payload** of any other UDP frame (a
//! captured telemetry report, a DTA datagram). So both formats replay to the same datagrams.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

use dta_int::gen::{eth_ipv4_udp, md_frame, stacked_report};
use dta_int_wire::{find_int, IntDetect};
use dta_net::{ethernet, ipv4, ipv6, udp, IPPROTO_UDP};

use crate::intgen::Traffic;

/// UDP port telemetry reports are sent to in `reports` traces (the port ONOS and most INT
/// collectors listen on; `dta pcap replay` does not care: it sends to `--to`).
pub const DEFAULT_REPORT_PORT: u16 = dta_int_wire::REPORT_PORT;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcapFormat {
    /// INT-MD frames as captured at the sink.
    Frames,
    /// Telemetry reports v2.0 (stacked: the frame inside) from the sink to the collector.
    Reports,
}

#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("pcap: {0}")]
    Pcap(#[from] pcap_file::PcapError),
    #[error("pcap link type {0:?}: only Ethernet captures can be replayed")]
    LinkType(DataLink),
}

/// The frame of a `reports` trace carrying `report` from switch `node_id` (IPv4 source
/// 192.0.2.x, documentation addresses) to the collector on `report_port`.
pub fn report_frame(node_id: u32, report_port: u16, report: &[u8]) -> Vec<u8> {
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&[192, 0, 2, (node_id % 250) as u8 + 1]);
    k[4..8].copy_from_slice(&[192, 0, 2, 254]);
    k[8..10].copy_from_slice(&40000u16.to_be_bytes());
    k[10..12].copy_from_slice(&report_port.to_be_bytes());
    k[12] = 17;
    eth_ipv4_udp(
        [2, 0, 0, 0, 0, 0xfe],
        [2, 0, 0, 0, 0, 0xfd],
        &k,
        64,
        report_port,
        report,
    )
}

/// Write `traffic` as a pcap; returns the records written.
pub fn write_pcap(
    path: &Path,
    traffic: &Traffic,
    format: PcapFormat,
    report_port: u16,
) -> Result<usize, PcapError> {
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::NanoSecond,
        snaplen: 65535,
        endianness: Endianness::Little,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(BufWriter::new(File::create(path)?), header)?;
    let port = traffic.truth.config.int_udp_port;
    for (seq, p) in traffic.packets.iter().enumerate() {
        let frame = md_frame(p, port);
        let data = match format {
            PcapFormat::Frames => frame,
            PcapFormat::Reports => {
                let sink = p.hops.last().map_or(0, |h| h.node_id);
                report_frame(sink, report_port, &stacked_report(sink, seq as u32, &frame))
            }
        };
        w.write_packet(&PcapPacket::new(
            Duration::from_nanos(p.time_ns),
            data.len() as u32,
            &data,
        ))?;
    }
    use std::io::Write;
    w.into_writer().flush()?;
    Ok(traffic.packets.len())
}

/// Read every record of an Ethernet pcap: `(timestamp, frame)`.
pub fn read_pcap(path: &Path) -> Result<Vec<(Duration, Vec<u8>)>, PcapError> {
    let mut r = PcapReader::new(BufReader::new(File::open(path)?))?;
    if r.header().datalink != DataLink::ETHERNET {
        return Err(PcapError::LinkType(r.header().datalink));
    }
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p?;
        out.push((p.timestamp, p.data.into_owned()));
    }
    Ok(out)
}

/// The UDP payload of an Ethernet frame (IPv4 or IPv6, VLAN tags allowed), if it is UDP.
pub fn udp_payload(frame: &[u8]) -> Option<&[u8]> {
    let (ethertype, l3) = ethernet::Packet::new_checked(frame)
        .and_then(|f| f.untagged_payload())
        .ok()?;
    let l4 = match ethertype {
        ethernet::ETHERTYPE_IPV4 => {
            let ip = ipv4::Packet::new_checked(l3).ok()?;
            if ip.protocol() != IPPROTO_UDP || ip.frag_offset() != 0 {
                return None;
            }
            ip.into_payload()
        }
        ethernet::ETHERTYPE_IPV6 => {
            let ip = ipv6::Packet::new_checked(l3).ok()?;
            if ip.next_header() != IPPROTO_UDP {
                return None;
            }
            ip.into_payload()
        }
        _ => return None,
    };
    udp::Packet::new_checked(l4).ok().map(|u| u.into_payload())
}

/// What replay sends for each record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayMode {
    /// INT frames (detected by the INT UDP port) wrapped in a telemetry report; other UDP frames'
    /// payload.
    Auto,
    /// The UDP payload of every UDP frame.
    Payload,
    /// Every INT frame wrapped in a telemetry report; anything else skipped.
    Wrap,
}

#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub to: SocketAddr,
    /// Datagrams per second; `None`: as fast as the socket takes them.
    pub rate: Option<f64>,
    pub mode: ReplayMode,
    /// The UDP destination port that announces INT in the frames.
    pub int_udp_port: u16,
    /// Stop after this many datagrams.
    pub limit: Option<u64>,
}

/// What a replay did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ReplayStats {
    pub records: u64,
    pub sent: u64,
    pub wrapped: u64,
    pub bytes: u64,
    /// Records with nothing to send (not UDP, or not INT in `wrap` mode).
    pub skipped: u64,
    pub send_errors: u64,
    /// When the replay began (Unix milliseconds): a paced record `i` was sent about `i / rate`
    /// seconds later, so a ground truth's frame index is a time on the receiver's clock.
    pub started_ms: u64,
    pub seconds: f64,
}

/// The datagram replay sends for `frame` (`seq` numbers the wrapped reports), or `None`.
pub fn datagram_for(frame: &[u8], opts: &ReplayOptions, seq: u32) -> Option<(Vec<u8>, bool)> {
    let detect = IntDetect::udp_port(opts.int_udp_port);
    let wrap = |frame: &[u8]| -> Option<Vec<u8>> {
        let int = find_int(frame, &detect).ok()??;
        let sink = int
            .stack()
            .and_then(|s| s.get(0))
            .and_then(|h| h.node_id)
            .unwrap_or(0);
        Some(stacked_report(sink, seq, frame))
    };
    match opts.mode {
        ReplayMode::Payload => udp_payload(frame).map(|p| (p.to_vec(), false)),
        ReplayMode::Wrap => wrap(frame).map(|d| (d, true)),
        ReplayMode::Auto => wrap(frame)
            .map(|d| (d, true))
            .or_else(|| udp_payload(frame).map(|p| (p.to_vec(), false))),
    }
}

/// Send the records of `path` to `opts.to`, streaming the file (a trace of any size), in
/// batches of up to [`SEND_BATCH`] datagrams per `sendmmsg(2)`: paced, a batch holds what is
/// due in [`PACE_SLICE`] at the rate (1 datagram at low rates), so the pacing stays as even as
/// the sleeps allow while a fast rate costs one system call per batch, not per datagram.
pub fn replay(path: &Path, opts: &ReplayOptions) -> Result<ReplayStats, PcapError> {
    replay_with(path, opts, &|_| {})
}

/// [`replay`], calling `progress` with the counts so far after every batch sent.
pub fn replay_with(
    path: &Path,
    opts: &ReplayOptions,
    progress: &dyn Fn(&ReplayStats),
) -> Result<ReplayStats, PcapError> {
    let mut reader = PcapReader::new(BufReader::new(File::open(path)?))?;
    if reader.header().datalink != DataLink::ETHERNET {
        return Err(PcapError::LinkType(reader.header().datalink));
    }
    let bind: SocketAddr = if opts.to.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    let socket = UdpSocket::bind(bind)?;
    let rate = opts.rate.filter(|r| *r > 0.0);
    let batch = rate.map_or(SEND_BATCH, |r| {
        ((r * PACE_SLICE.as_secs_f64()) as usize).clamp(1, SEND_BATCH)
    });
    let mut out = SendBatch::new(opts.to);
    let mut st = ReplayStats {
        started_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        ..ReplayStats::default()
    };
    let start = Instant::now();
    let mut wrapped_seq = 0u32;
    let mut queued = 0u64;
    loop {
        let rec = if opts.limit.is_some_and(|l| queued >= l) {
            None
        } else {
            reader.next_packet()
        };
        let last = rec.is_none();
        if let Some(rec) = rec {
            let rec = rec?;
            st.records += 1;
            let Some((dgram, wrapped)) = datagram_for(&rec.data, opts, wrapped_seq) else {
                st.skipped += 1;
                continue;
            };
            if wrapped {
                wrapped_seq = wrapped_seq.wrapping_add(1);
                st.wrapped += 1;
            }
            out.push(dgram);
            queued += 1;
        }
        if out.len() >= batch || (last && out.len() > 0) {
            if let Some(rate) = rate {
                let due = start + Duration::from_secs_f64(st.sent as f64 / rate);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            out.send(&socket, &mut st);
            progress(&st);
        }
        if last {
            break;
        }
    }
    st.seconds = start.elapsed().as_secs_f64();
    Ok(st)
}

/// Datagrams per `sendmmsg(2)` at most.
pub const SEND_BATCH: usize = 64;
/// Paced replay sends what is due in this long per system call.
pub const PACE_SLICE: Duration = Duration::from_micros(100);

/// Datagrams waiting for one `sendmmsg(2)` to one destination ([`dta_net::mmsg::Sender`]).
struct SendBatch {
    sender: dta_net::mmsg::Sender,
    dgrams: Vec<Vec<u8>>,
}

impl SendBatch {
    fn new(to: SocketAddr) -> SendBatch {
        SendBatch {
            sender: dta_net::mmsg::Sender::new(Some(to)),
            dgrams: Vec::with_capacity(SEND_BATCH),
        }
    }

    fn len(&self) -> usize {
        self.dgrams.len()
    }

    fn push(&mut self, d: Vec<u8>) {
        self.dgrams.push(d);
    }

    /// Send everything queued: a full socket buffer is retried briefly; any other error, or a
    /// full buffer that lasts, counts the datagram it stopped at as an error and goes on.
    fn send(&mut self, socket: &UdpSocket, st: &mut ReplayStats) {
        let s = self
            .sender
            .send(socket.as_raw_fd(), self.dgrams.iter().map(Vec::as_slice));
        st.sent += s.datagrams;
        st.bytes += s.bytes;
        st.send_errors += s.errors;
        self.dgrams.clear();
    }
}
