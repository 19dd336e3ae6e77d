// Size: the six RDMA CM MADs (REQ, REP, REJ, RTU, DREQ, DREP) share one MAD header and one
// field-layout table ([IBTA §12.6]); about 150 lines are unit tests.
//! Communication Management MADs ([IBTA §12.6], Tables 106-113; Linux
//! `include/rdma/ibta_vol1_c12.h` / `drivers/infiniband/core/cm_msgs.h`) as RDMA CM sends them
//! over RoCEv2: a 256-byte MAD in the payload of a UD SEND Only to QP1 (DETH Q_Key
//! [`super::QP1_QKEY`]). The MAD is a 24-byte common header (base version 1, management class
//! 0x07 CM, class version 2, method SEND) followed by the attribute: REQ, MRA, REJ, REP, RTU,
//! DREQ or DREP. RDMA CM (`librdmacm`, Linux `cma.c`) addresses a listener by the service id
//! `0x0000000001060000 | port` (port space TCP) and puts a 36-byte [`CmaHeader`] with the IP
//! addresses at the start of the REQ private data.
//!
//! Field offsets below are relative to the end of the MAD header, as in the IBA tables; bits are
//! numbered from the most significant bit of each byte. Reserved bits are sent as 0 and
//! ignored on receipt.

use super::{fits, rd16, rd24, rd32, rd64, wr16, wr24, wr32, wr64, Error, MAX_U24};

/// Length of a MAD.
pub const MAD_LEN: usize = 256;
/// Length of the MAD common header.
pub const MAD_HEADER_LEN: usize = 24;
/// Length of a CM attribute (the MAD data).
pub const CM_DATA_LEN: usize = MAD_LEN - MAD_HEADER_LEN;
/// MAD base version.
pub const BASE_VERSION: u8 = 1;
/// Management class of CM.
pub const MGMT_CLASS_CM: u8 = 0x07;
/// CM class version (IBA 1.2).
pub const CLASS_VERSION: u8 = 2;
/// Method SEND, the only one CM uses.
pub const METHOD_SEND: u8 = 0x03;
/// RDMA CM service id prefix of the TCP port space (`RDMA_PS_TCP` 0x0106 << 16).
pub const RDMA_CM_SERVICE_ID_TCP: u64 = 0x0000_0000_0106_0000;
/// Private data of a REQ.
pub const REQ_PRIVATE_DATA_LEN: usize = 92;
/// Private data of a REP.
pub const REP_PRIVATE_DATA_LEN: usize = 196;
/// Private data of a REJ.
pub const REJ_PRIVATE_DATA_LEN: usize = 148;
/// Additional rejection information of a REJ.
pub const REJ_ARI_LEN: usize = 72;
/// Private data of an MRA.
pub const MRA_PRIVATE_DATA_LEN: usize = 222;
/// Private data of an RTU or DREP.
pub const RTU_PRIVATE_DATA_LEN: usize = 224;
/// Private data of a DREQ.
pub const DREQ_PRIVATE_DATA_LEN: usize = 220;
/// Length of the RDMA CM header at the start of REQ private data.
pub const CMA_HEADER_LEN: usize = 36;

/// The RDMA CM service id of a TCP-port-space listener on `port`.
pub const fn rdma_cm_service_id(port: u16) -> u64 {
    RDMA_CM_SERVICE_ID_TCP | port as u64
}

/// The port of an RDMA CM TCP-port-space service id, or `None` for another service id.
pub const fn rdma_cm_port(service_id: u64) -> Option<u16> {
    if service_id & !0xffff == RDMA_CM_SERVICE_ID_TCP {
        Some(service_id as u16)
    } else {
        None
    }
}

/// The IPv4-mapped GID (`::ffff:a.b.c.d`) RoCEv2 uses for an IPv4 address.
pub const fn ipv4_mapped_gid(ip: [u8; 4]) -> [u8; 16] {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ip[0], ip[1], ip[2], ip[3],
    ]
}

/// MAD common header byte ranges (IBA §13.4.3).
pub mod field {
    use core::ops::Range;
    /// Base version.
    pub const BASE_VERSION: usize = 0;
    /// Management class.
    pub const MGMT_CLASS: usize = 1;
    /// Class version.
    pub const CLASS_VERSION: usize = 2;
    /// Method (R bit and method).
    pub const METHOD: usize = 3;
    /// Status.
    pub const STATUS: Range<usize> = 4..6;
    /// Class specific.
    pub const CLASS_SPECIFIC: Range<usize> = 6..8;
    /// Transaction id.
    pub const TID: Range<usize> = 8..16;
    /// Attribute id.
    pub const ATTR_ID: Range<usize> = 16..18;
    /// Reserved.
    pub const RESERVED: Range<usize> = 18..20;
    /// Attribute modifier.
    pub const ATTR_MOD: Range<usize> = 20..24;
}

/// CM attribute ids (IBA Table 104).
#[repr(u16)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttributeId {
    /// Connect request.
    Req = 0x0010,
    /// Message receipt acknowledgement.
    Mra = 0x0011,
    /// Reject.
    Rej = 0x0012,
    /// Connect reply.
    Rep = 0x0013,
    /// Ready to use.
    Rtu = 0x0014,
    /// Disconnect request.
    Dreq = 0x0015,
    /// Disconnect reply.
    Drep = 0x0016,
}

impl AttributeId {
    /// Decode; `UnknownAttribute` for other ids.
    pub fn from_u16(v: u16) -> Result<AttributeId, Error> {
        Ok(match v {
            0x10 => AttributeId::Req,
            0x11 => AttributeId::Mra,
            0x12 => AttributeId::Rej,
            0x13 => AttributeId::Rep,
            0x14 => AttributeId::Rtu,
            0x15 => AttributeId::Dreq,
            0x16 => AttributeId::Drep,
            _ => return Err(Error::UnknownAttribute),
        })
    }

    /// "req", "mra", "rej", "rep", "rtu", "dreq" or "drep".
    pub fn name(self) -> &'static str {
        match self {
            AttributeId::Req => "req",
            AttributeId::Mra => "mra",
            AttributeId::Rej => "rej",
            AttributeId::Rep => "rep",
            AttributeId::Rtu => "rtu",
            AttributeId::Dreq => "dreq",
            AttributeId::Drep => "drep",
        }
    }
}

/// A zero-copy view of a MAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checks; accessors panic on a buffer shorter than [`MAD_LEN`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }
    /// Wrap, checking the buffer holds a whole MAD.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        if buffer.as_ref().len() < MAD_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Base version.
    pub fn base_version(&self) -> u8 {
        self.b()[field::BASE_VERSION]
    }
    /// Management class.
    pub fn mgmt_class(&self) -> u8 {
        self.b()[field::MGMT_CLASS]
    }
    /// Class version.
    pub fn class_version(&self) -> u8 {
        self.b()[field::CLASS_VERSION]
    }
    /// Method.
    pub fn method(&self) -> u8 {
        self.b()[field::METHOD]
    }
    /// Status.
    pub fn status(&self) -> u16 {
        rd16(&self.b()[field::STATUS])
    }
    /// Transaction id.
    pub fn transaction_id(&self) -> u64 {
        rd64(&self.b()[field::TID])
    }
    /// Attribute id.
    pub fn attribute_id(&self) -> u16 {
        rd16(&self.b()[field::ATTR_ID])
    }
    /// Attribute modifier.
    pub fn attribute_modifier(&self) -> u32 {
        rd32(&self.b()[field::ATTR_MOD])
    }
    /// The CM attribute (232 bytes).
    pub fn data(&self) -> &[u8] {
        &self.b()[MAD_HEADER_LEN..MAD_LEN]
    }
}

fn copy_private(dst: &mut [u8], src: &[u8]) -> Result<(), Error> {
    if src.len() > dst.len() {
        return Err(Error::BadLength);
    }
    dst[..src.len()].copy_from_slice(src);
    dst[src.len()..].fill(0);
    Ok(())
}

fn gid(b: &[u8]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[..16]);
    g
}

/// One path of a REQ (primary at offset 52, alternate at 96; 44 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PathRepr {
    /// Local port LID (0xffff permissive on RoCE).
    pub local_lid: u16,
    /// Remote port LID.
    pub remote_lid: u16,
    /// Local port GID (an IPv4-mapped address on RoCEv2).
    pub local_gid: [u8; 16],
    /// Remote port GID.
    pub remote_gid: [u8; 16],
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Packet rate (6 bits).
    pub packet_rate: u8,
    /// Traffic class (the IP DSCP/ECN byte on RoCEv2).
    pub traffic_class: u8,
    /// Hop limit (the IP TTL).
    pub hop_limit: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Subnet local.
    pub subnet_local: bool,
    /// Local ACK timeout (5 bits, 4.096 us * 2^n).
    pub local_ack_timeout: u8,
}

/// Length of a REQ path.
pub const PATH_LEN: usize = 44;

impl PathRepr {
    /// Parse 44 bytes.
    pub fn parse(b: &[u8]) -> PathRepr {
        PathRepr {
            local_lid: rd16(&b[0..]),
            remote_lid: rd16(&b[2..]),
            local_gid: gid(&b[4..]),
            remote_gid: gid(&b[20..]),
            flow_label: rd32(&b[36..]) >> 12,
            packet_rate: b[39] & 0x3f,
            traffic_class: b[40],
            hop_limit: b[41],
            sl: b[42] >> 4,
            subnet_local: b[42] & 0x08 != 0,
            local_ack_timeout: b[43] >> 3,
        }
    }

    /// Emit 44 bytes (reserved bits 0).
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        fits(self.flow_label, 0xf_ffff)?;
        fits(self.packet_rate.into(), 0x3f)?;
        fits(self.sl.into(), 0xf)?;
        fits(self.local_ack_timeout.into(), 0x1f)?;
        wr16(&mut b[0..], self.local_lid);
        wr16(&mut b[2..], self.remote_lid);
        b[4..20].copy_from_slice(&self.local_gid);
        b[20..36].copy_from_slice(&self.remote_gid);
        wr32(&mut b[36..], self.flow_label << 12);
        b[39] = self.packet_rate;
        b[40] = self.traffic_class;
        b[41] = self.hop_limit;
        b[42] = (self.sl << 4) | if self.subnet_local { 0x08 } else { 0 };
        b[43] = self.local_ack_timeout << 3;
        Ok(())
    }
}

/// REQ (IBA Table 106).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqRepr<'a> {
    /// Local communication id.
    pub local_comm_id: u32,
    /// Vendor id (24 bits).
    pub vendor_id: u32,
    /// Service id (RDMA CM: [`rdma_cm_service_id`]).
    pub service_id: u64,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Local Q_Key (UD only).
    pub local_qkey: u32,
    /// Local QPN (24 bits).
    pub local_qpn: u32,
    /// Responder resources (RDMA READ / atomic depth offered).
    pub responder_resources: u8,
    /// Local EECN (24 bits, RD only).
    pub local_eecn: u32,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Remote EECN (24 bits).
    pub remote_eecn: u32,
    /// Remote CM response timeout (5 bits).
    pub remote_cm_response_timeout: u8,
    /// Transport service type (2 bits: 0 RC, 1 UC, 3 XRC).
    pub transport_service_type: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// Starting PSN (24 bits): the requester's first PSN.
    pub starting_psn: u32,
    /// Local CM response timeout (5 bits).
    pub local_cm_response_timeout: u8,
    /// Transport retry count (3 bits).
    pub retry_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// Path MTU (4 bits: 1 = 256 ... 5 = 4096).
    pub path_mtu: u8,
    /// RDC exists.
    pub rdc_exists: bool,
    /// RNR retry count (3 bits, 7 = infinite).
    pub rnr_retry_count: u8,
    /// Max CM retries (4 bits).
    pub max_cm_retries: u8,
    /// SRQ.
    pub srq: bool,
    /// Extended transport type (3 bits).
    pub extended_transport_type: u8,
    /// Primary path.
    pub primary_path: PathRepr,
    /// Alternate path (all zero when there is none).
    pub alternate_path: PathRepr,
    /// SAP supported.
    pub sap_supported: bool,
    /// Private data (at most 92 bytes; parsed: all 92).
    pub private_data: &'a [u8],
}

impl<'a> ReqRepr<'a> {
    /// Parse the 232-byte CM data.
    pub fn parse(b: &'a [u8]) -> Result<ReqRepr<'a>, Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        Ok(ReqRepr {
            local_comm_id: rd32(&b[0..]),
            vendor_id: rd24(&b[5..]),
            service_id: rd64(&b[8..]),
            local_ca_guid: rd64(&b[16..]),
            local_qkey: rd32(&b[28..]),
            local_qpn: rd24(&b[32..]),
            responder_resources: b[35],
            local_eecn: rd24(&b[36..]),
            initiator_depth: b[39],
            remote_eecn: rd24(&b[40..]),
            remote_cm_response_timeout: b[43] >> 3,
            transport_service_type: (b[43] >> 1) & 3,
            end_to_end_flow_control: b[43] & 1 != 0,
            starting_psn: rd24(&b[44..]),
            local_cm_response_timeout: b[47] >> 3,
            retry_count: b[47] & 7,
            pkey: rd16(&b[48..]),
            path_mtu: b[50] >> 4,
            rdc_exists: b[50] & 0x08 != 0,
            rnr_retry_count: b[50] & 7,
            max_cm_retries: b[51] >> 4,
            srq: b[51] & 0x08 != 0,
            extended_transport_type: b[51] & 7,
            primary_path: PathRepr::parse(&b[52..96]),
            alternate_path: PathRepr::parse(&b[96..140]),
            sap_supported: b[139] & 0x04 != 0,
            private_data: &b[140..CM_DATA_LEN],
        })
    }

    /// Emit the 232-byte CM data.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        for v in [
            self.vendor_id,
            self.local_qpn,
            self.local_eecn,
            self.remote_eecn,
            self.starting_psn,
        ] {
            fits(v, MAX_U24)?;
        }
        fits(self.remote_cm_response_timeout.into(), 0x1f)?;
        fits(self.local_cm_response_timeout.into(), 0x1f)?;
        fits(self.transport_service_type.into(), 3)?;
        fits(self.retry_count.into(), 7)?;
        fits(self.path_mtu.into(), 0xf)?;
        fits(self.rnr_retry_count.into(), 7)?;
        fits(self.max_cm_retries.into(), 0xf)?;
        fits(self.extended_transport_type.into(), 7)?;
        let b = &mut b[..CM_DATA_LEN];
        b.fill(0);
        wr32(&mut b[0..], self.local_comm_id);
        wr24(&mut b[5..], self.vendor_id);
        wr64(&mut b[8..], self.service_id);
        wr64(&mut b[16..], self.local_ca_guid);
        wr32(&mut b[28..], self.local_qkey);
        wr24(&mut b[32..], self.local_qpn);
        b[35] = self.responder_resources;
        wr24(&mut b[36..], self.local_eecn);
        b[39] = self.initiator_depth;
        wr24(&mut b[40..], self.remote_eecn);
        b[43] = (self.remote_cm_response_timeout << 3)
            | (self.transport_service_type << 1)
            | u8::from(self.end_to_end_flow_control);
        wr24(&mut b[44..], self.starting_psn);
        b[47] = (self.local_cm_response_timeout << 3) | self.retry_count;
        wr16(&mut b[48..], self.pkey);
        b[50] =
            (self.path_mtu << 4) | if self.rdc_exists { 0x08 } else { 0 } | self.rnr_retry_count;
        b[51] = (self.max_cm_retries << 4)
            | if self.srq { 0x08 } else { 0 }
            | self.extended_transport_type;
        self.primary_path.emit(&mut b[52..96])?;
        self.alternate_path.emit(&mut b[96..140])?;
        if self.sap_supported {
            b[139] |= 0x04;
        }
        copy_private(&mut b[140..], self.private_data)
    }
}

/// REP (IBA Table 110).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepRepr<'a> {
    /// Local communication id (the responder's).
    pub local_comm_id: u32,
    /// Remote communication id (the requester's, from the REQ).
    pub remote_comm_id: u32,
    /// Local Q_Key.
    pub local_qkey: u32,
    /// Local QPN (24 bits): the responder's QP the requester sends to.
    pub local_qpn: u32,
    /// Local EE context number (24 bits).
    pub local_eecn: u32,
    /// Starting PSN (24 bits): the responder's first PSN.
    pub starting_psn: u32,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Target ACK delay (5 bits).
    pub target_ack_delay: u8,
    /// Failover accepted (2 bits).
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// Vendor id (24 bits, split over bytes 15, 19 and 23).
    pub vendor_id: u32,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Private data (at most 196 bytes; parsed: all 196).
    pub private_data: &'a [u8],
}

impl<'a> RepRepr<'a> {
    /// Parse the 232-byte CM data.
    pub fn parse(b: &'a [u8]) -> Result<RepRepr<'a>, Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        Ok(RepRepr {
            local_comm_id: rd32(&b[0..]),
            remote_comm_id: rd32(&b[4..]),
            local_qkey: rd32(&b[8..]),
            local_qpn: rd24(&b[12..]),
            local_eecn: rd24(&b[16..]),
            starting_psn: rd24(&b[20..]),
            responder_resources: b[24],
            initiator_depth: b[25],
            target_ack_delay: b[26] >> 3,
            failover_accepted: (b[26] >> 1) & 3,
            end_to_end_flow_control: b[26] & 1 != 0,
            rnr_retry_count: b[27] >> 5,
            srq: b[27] & 0x10 != 0,
            vendor_id: u32::from_be_bytes([0, b[15], b[19], b[23]]),
            local_ca_guid: rd64(&b[28..]),
            private_data: &b[36..CM_DATA_LEN],
        })
    }

    /// Emit the 232-byte CM data.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        for v in [
            self.local_qpn,
            self.local_eecn,
            self.starting_psn,
            self.vendor_id,
        ] {
            fits(v, MAX_U24)?;
        }
        fits(self.target_ack_delay.into(), 0x1f)?;
        fits(self.failover_accepted.into(), 3)?;
        fits(self.rnr_retry_count.into(), 7)?;
        let b = &mut b[..CM_DATA_LEN];
        b.fill(0);
        wr32(&mut b[0..], self.local_comm_id);
        wr32(&mut b[4..], self.remote_comm_id);
        wr32(&mut b[8..], self.local_qkey);
        wr24(&mut b[12..], self.local_qpn);
        wr24(&mut b[16..], self.local_eecn);
        wr24(&mut b[20..], self.starting_psn);
        let v = self.vendor_id.to_be_bytes();
        b[15] = v[1];
        b[19] = v[2];
        b[23] = v[3];
        b[24] = self.responder_resources;
        b[25] = self.initiator_depth;
        b[26] = (self.target_ack_delay << 3)
            | (self.failover_accepted << 1)
            | u8::from(self.end_to_end_flow_control);
        b[27] = (self.rnr_retry_count << 5) | if self.srq { 0x10 } else { 0 };
        wr64(&mut b[28..], self.local_ca_guid);
        copy_private(&mut b[36..], self.private_data)
    }
}

/// REJ (IBA Table 108).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RejRepr<'a> {
    /// Local communication id (the rejecter's; 0 if unknown).
    pub local_comm_id: u32,
    /// Remote communication id.
    pub remote_comm_id: u32,
    /// Message rejected (2 bits: 0 REQ, 1 REP, 2 no message).
    pub message_rejected: u8,
    /// Length of the valid ARI (7 bits).
    pub reject_info_length: u8,
    /// Reason (IBA Table 109, e.g. 28 consumer reject, 8 invalid service id).
    pub reason: u16,
    /// Additional rejection information (72 bytes; parsed: all 72).
    pub ari: &'a [u8],
    /// Private data (at most 148 bytes; parsed: all 148).
    pub private_data: &'a [u8],
}

impl<'a> RejRepr<'a> {
    /// Parse the 232-byte CM data.
    pub fn parse(b: &'a [u8]) -> Result<RejRepr<'a>, Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        Ok(RejRepr {
            local_comm_id: rd32(&b[0..]),
            remote_comm_id: rd32(&b[4..]),
            message_rejected: b[8] >> 6,
            reject_info_length: b[9] >> 1,
            reason: rd16(&b[10..]),
            ari: &b[12..84],
            private_data: &b[84..CM_DATA_LEN],
        })
    }

    /// Emit the 232-byte CM data.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        fits(self.message_rejected.into(), 3)?;
        fits(self.reject_info_length.into(), 0x7f)?;
        let b = &mut b[..CM_DATA_LEN];
        b.fill(0);
        wr32(&mut b[0..], self.local_comm_id);
        wr32(&mut b[4..], self.remote_comm_id);
        b[8] = self.message_rejected << 6;
        b[9] = self.reject_info_length << 1;
        wr16(&mut b[10..], self.reason);
        copy_private(&mut b[12..84], self.ari)?;
        copy_private(&mut b[84..], self.private_data)
    }
}

/// MRA (IBA Table 107).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MraRepr<'a> {
    /// Local communication id.
    pub local_comm_id: u32,
    /// Remote communication id.
    pub remote_comm_id: u32,
    /// Message MRAed (2 bits: 0 REQ, 1 REP, 2 LAP).
    pub message_mraed: u8,
    /// Service timeout (5 bits).
    pub service_timeout: u8,
    /// Private data (at most 222 bytes; parsed: all 222).
    pub private_data: &'a [u8],
}

impl<'a> MraRepr<'a> {
    /// Parse the 232-byte CM data.
    pub fn parse(b: &'a [u8]) -> Result<MraRepr<'a>, Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        Ok(MraRepr {
            local_comm_id: rd32(&b[0..]),
            remote_comm_id: rd32(&b[4..]),
            message_mraed: b[8] >> 6,
            service_timeout: b[9] >> 3,
            private_data: &b[10..CM_DATA_LEN],
        })
    }

    /// Emit the 232-byte CM data.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        fits(self.message_mraed.into(), 3)?;
        fits(self.service_timeout.into(), 0x1f)?;
        let b = &mut b[..CM_DATA_LEN];
        b.fill(0);
        wr32(&mut b[0..], self.local_comm_id);
        wr32(&mut b[4..], self.remote_comm_id);
        b[8] = self.message_mraed << 6;
        b[9] = self.service_timeout << 3;
        copy_private(&mut b[10..], self.private_data)
    }
}

/// RTU (IBA Table 111) and DREP (Table 113): the two communication ids and private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdsRepr<'a> {
    /// Local communication id.
    pub local_comm_id: u32,
    /// Remote communication id.
    pub remote_comm_id: u32,
    /// Private data (at most 224 bytes; parsed: all 224).
    pub private_data: &'a [u8],
}

impl<'a> IdsRepr<'a> {
    /// Parse the 232-byte CM data.
    pub fn parse(b: &'a [u8]) -> Result<IdsRepr<'a>, Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        Ok(IdsRepr {
            local_comm_id: rd32(&b[0..]),
            remote_comm_id: rd32(&b[4..]),
            private_data: &b[8..CM_DATA_LEN],
        })
    }

    /// Emit the 232-byte CM data.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        let b = &mut b[..CM_DATA_LEN];
        b.fill(0);
        wr32(&mut b[0..], self.local_comm_id);
        wr32(&mut b[4..], self.remote_comm_id);
        copy_private(&mut b[8..], self.private_data)
    }
}

/// DREQ (IBA Table 112).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DreqRepr<'a> {
    /// Local communication id.
    pub local_comm_id: u32,
    /// Remote communication id.
    pub remote_comm_id: u32,
    /// Remote QPN / EECN (24 bits).
    pub remote_qpn: u32,
    /// Private data (at most 220 bytes; parsed: all 220).
    pub private_data: &'a [u8],
}

impl<'a> DreqRepr<'a> {
    /// Parse the 232-byte CM data.
    pub fn parse(b: &'a [u8]) -> Result<DreqRepr<'a>, Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        Ok(DreqRepr {
            local_comm_id: rd32(&b[0..]),
            remote_comm_id: rd32(&b[4..]),
            remote_qpn: rd24(&b[8..]),
            private_data: &b[12..CM_DATA_LEN],
        })
    }

    /// Emit the 232-byte CM data.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        if b.len() < CM_DATA_LEN {
            return Err(Error::Truncated);
        }
        fits(self.remote_qpn, MAX_U24)?;
        let b = &mut b[..CM_DATA_LEN];
        b.fill(0);
        wr32(&mut b[0..], self.local_comm_id);
        wr32(&mut b[4..], self.remote_comm_id);
        wr24(&mut b[8..], self.remote_qpn);
        copy_private(&mut b[12..], self.private_data)
    }
}

/// A CM message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message<'a> {
    /// Connect request.
    Req(ReqRepr<'a>),
    /// Message receipt acknowledgement.
    Mra(MraRepr<'a>),
    /// Reject.
    Rej(RejRepr<'a>),
    /// Connect reply.
    Rep(RepRepr<'a>),
    /// Ready to use.
    Rtu(IdsRepr<'a>),
    /// Disconnect request.
    Dreq(DreqRepr<'a>),
    /// Disconnect reply.
    Drep(IdsRepr<'a>),
}

impl Message<'_> {
    /// The attribute id.
    pub fn attribute_id(&self) -> AttributeId {
        match self {
            Message::Req(_) => AttributeId::Req,
            Message::Mra(_) => AttributeId::Mra,
            Message::Rej(_) => AttributeId::Rej,
            Message::Rep(_) => AttributeId::Rep,
            Message::Rtu(_) => AttributeId::Rtu,
            Message::Dreq(_) => AttributeId::Dreq,
            Message::Drep(_) => AttributeId::Drep,
        }
    }
}

/// A CM MAD: the common header (base version 1, class CM, class version 2, method SEND, status
/// 0, attribute modifier 0) and a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadRepr<'a> {
    /// Transaction id (the same for REQ, REP and RTU of one connection in RDMA CM).
    pub transaction_id: u64,
    /// The attribute.
    pub message: Message<'a>,
}

impl<'a> MadRepr<'a> {
    /// Parse a MAD (the UD payload; bytes after the 256 are ignored). `truncated` if shorter,
    /// `not_cm` for another base version, class, class version or method, `unknown_attribute`.
    pub fn parse(buf: &'a [u8]) -> Result<MadRepr<'a>, Error> {
        let p = Packet::new_checked(buf)?;
        if p.base_version() != BASE_VERSION
            || p.mgmt_class() != MGMT_CLASS_CM
            || p.class_version() != CLASS_VERSION
            || p.method() != METHOD_SEND
        {
            return Err(Error::NotCm);
        }
        let d = &buf[MAD_HEADER_LEN..MAD_LEN];
        let message = match AttributeId::from_u16(p.attribute_id())? {
            AttributeId::Req => Message::Req(ReqRepr::parse(d)?),
            AttributeId::Mra => Message::Mra(MraRepr::parse(d)?),
            AttributeId::Rej => Message::Rej(RejRepr::parse(d)?),
            AttributeId::Rep => Message::Rep(RepRepr::parse(d)?),
            AttributeId::Rtu => Message::Rtu(IdsRepr::parse(d)?),
            AttributeId::Dreq => Message::Dreq(DreqRepr::parse(d)?),
            AttributeId::Drep => Message::Drep(IdsRepr::parse(d)?),
        };
        Ok(MadRepr {
            transaction_id: p.transaction_id(),
            message,
        })
    }

    /// Length on the wire.
    pub const fn buffer_len(&self) -> usize {
        MAD_LEN
    }

    /// Emit the 256-byte MAD.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        if buf.len() < MAD_LEN {
            return Err(Error::Truncated);
        }
        let (h, d) = buf[..MAD_LEN].split_at_mut(MAD_HEADER_LEN);
        match &self.message {
            Message::Req(m) => m.emit(d)?,
            Message::Mra(m) => m.emit(d)?,
            Message::Rej(m) => m.emit(d)?,
            Message::Rep(m) => m.emit(d)?,
            Message::Rtu(m) | Message::Drep(m) => m.emit(d)?,
            Message::Dreq(m) => m.emit(d)?,
        }
        h.fill(0);
        h[field::BASE_VERSION] = BASE_VERSION;
        h[field::MGMT_CLASS] = MGMT_CLASS_CM;
        h[field::CLASS_VERSION] = CLASS_VERSION;
        h[field::METHOD] = METHOD_SEND;
        wr64(&mut h[field::TID], self.transaction_id);
        wr16(&mut h[field::ATTR_ID], self.message.attribute_id() as u16);
        Ok(MAD_LEN)
    }
}

/// The RDMA CM header at the start of a REQ's private data (Linux `cma.c`, `struct cma_hdr`):
/// version 0, IP version 4 in the high nibble, the requester's source port, and the source and
/// destination addresses, each in a 16-byte slot (IPv4 in the last 4 bytes). The destination
/// port is not here: it is the low 16 bits of the service id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CmaHeader {
    /// The active side's source port.
    pub src_port: u16,
    /// The active side's IPv4 address.
    pub src_ip: [u8; 4],
    /// The passive side's IPv4 address.
    pub dst_ip: [u8; 4],
}

impl CmaHeader {
    /// RDMA CM header version.
    pub const VERSION: u8 = 0x00;

    /// Parse from REQ private data; `not_cm` unless version 0 and IP version 4.
    pub fn parse(private_data: &[u8]) -> Result<CmaHeader, Error> {
        let b = private_data.get(..CMA_HEADER_LEN).ok_or(Error::Truncated)?;
        if b[0] != Self::VERSION || b[1] >> 4 != 4 {
            return Err(Error::NotCm);
        }
        let mut src_ip = [0; 4];
        let mut dst_ip = [0; 4];
        src_ip.copy_from_slice(&b[16..20]);
        dst_ip.copy_from_slice(&b[32..36]);
        Ok(CmaHeader {
            src_port: rd16(&b[2..]),
            src_ip,
            dst_ip,
        })
    }

    /// Emit the 36 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let b = buf.get_mut(..CMA_HEADER_LEN).ok_or(Error::Truncated)?;
        b.fill(0);
        b[0] = Self::VERSION;
        b[1] = 4 << 4;
        wr16(&mut b[2..], self.src_port);
        b[16..20].copy_from_slice(&self.src_ip);
        b[32..36].copy_from_slice(&self.dst_ip);
        Ok(CMA_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_ids_and_gids() {
        assert_eq!(rdma_cm_service_id(7471), 0x0000_0000_0106_1d2f);
        assert_eq!(rdma_cm_port(0x0000_0000_0106_1d2f), Some(7471));
        assert_eq!(rdma_cm_port(0x0000_0000_0111_1d2f), None);
        assert_eq!(
            ipv4_mapped_gid([10, 0, 0, 1])[10..],
            [0xff, 0xff, 10, 0, 0, 1]
        );
    }

    #[test]
    fn req_bit_positions() {
        let pd = [0xaau8; 3];
        let req = ReqRepr {
            local_comm_id: 0x01020304,
            vendor_id: 0x0002c9,
            service_id: rdma_cm_service_id(7471),
            local_ca_guid: 0x1122334455667788,
            local_qkey: 0,
            local_qpn: 0x000123,
            responder_resources: 1,
            local_eecn: 0,
            initiator_depth: 2,
            remote_eecn: 0,
            remote_cm_response_timeout: 20,
            transport_service_type: 0,
            end_to_end_flow_control: true,
            starting_psn: 0xabcdef,
            local_cm_response_timeout: 20,
            retry_count: 7,
            pkey: 0xffff,
            path_mtu: 3,
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            extended_transport_type: 0,
            primary_path: PathRepr {
                local_lid: 0xffff,
                remote_lid: 0xffff,
                local_gid: ipv4_mapped_gid([10, 0, 0, 1]),
                remote_gid: ipv4_mapped_gid([10, 0, 0, 2]),
                flow_label: 0,
                packet_rate: 2,
                traffic_class: 0,
                hop_limit: 64,
                sl: 0,
                subnet_local: false,
                local_ack_timeout: 18,
            },
            alternate_path: PathRepr::default(),
            sap_supported: false,
            private_data: &pd,
        };
        let mad = MadRepr {
            transaction_id: 0x42,
            message: Message::Req(req),
        };
        let mut b = [0u8; 256];
        assert_eq!(mad.emit(&mut b), Ok(256));
        assert_eq!(&b[..4], &[1, 7, 2, 3]);
        assert_eq!(&b[16..18], &[0, 0x10]);
        let d = &b[24..];
        assert_eq!(&d[32..36], &[0, 1, 0x23, 1]); // QPN then responder resources
        assert_eq!(d[43], (20 << 3) | 1);
        assert_eq!(&d[44..48], &[0xab, 0xcd, 0xef, (20 << 3) | 7]);
        assert_eq!(&d[50..52], &[0x37, 0xf0]);
        assert_eq!(d[52 + 43], 18 << 3);
        assert_eq!(&d[140..144], &[0xaa, 0xaa, 0xaa, 0]);
        let back = MadRepr::parse(&b).unwrap();
        assert_eq!(back.transaction_id, 0x42);
        let Message::Req(r) = back.message else {
            panic!("not a REQ")
        };
        assert_eq!(r.private_data.len(), REQ_PRIVATE_DATA_LEN);
        assert_eq!(
            ReqRepr {
                private_data: &pd,
                ..r
            },
            req
        );
        b[1] = 0x81;
        assert_eq!(MadRepr::parse(&b), Err(Error::NotCm));
        b[1] = 7;
        b[17] = 0x19;
        assert_eq!(MadRepr::parse(&b), Err(Error::UnknownAttribute));
        assert_eq!(MadRepr::parse(&b[..255]), Err(Error::Truncated));
    }

    #[test]
    fn rep_vendor_id_split_and_cma_header() {
        let rep = RepRepr {
            local_comm_id: 9,
            remote_comm_id: 8,
            local_qkey: 0,
            local_qpn: 0x0000aa,
            local_eecn: 0,
            starting_psn: 0x123456,
            responder_resources: 1,
            initiator_depth: 1,
            target_ack_delay: 15,
            failover_accepted: 0,
            end_to_end_flow_control: true,
            rnr_retry_count: 7,
            srq: true,
            vendor_id: 0x0002c9,
            local_ca_guid: 1,
            private_data: &[],
        };
        let mut d = [0u8; CM_DATA_LEN];
        rep.emit(&mut d).unwrap();
        assert_eq!((d[15], d[19], d[23]), (0x00, 0x02, 0xc9));
        assert_eq!(&d[12..15], &[0, 0, 0xaa]);
        assert_eq!(d[26], (15 << 3) | 1);
        assert_eq!(d[27], 0xf0);
        let r = RepRepr::parse(&d).unwrap();
        assert_eq!(
            RepRepr {
                private_data: &[],
                ..r
            },
            rep
        );
        let too_long = [0u8; 197];
        assert_eq!(
            RepRepr {
                private_data: &too_long,
                ..rep
            }
            .emit(&mut d),
            Err(Error::BadLength)
        );

        let h = CmaHeader {
            src_port: 0xc001,
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
        };
        let mut pd = [0u8; REQ_PRIVATE_DATA_LEN];
        h.emit(&mut pd).unwrap();
        assert_eq!(&pd[..4], &[0, 0x40, 0xc0, 0x01]);
        assert_eq!(&pd[16..20], &[10, 0, 0, 1]);
        assert_eq!(&pd[32..36], &[10, 0, 0, 2]);
        assert_eq!(CmaHeader::parse(&pd), Ok(h));
        pd[1] = 0x60;
        assert_eq!(CmaHeader::parse(&pd), Err(Error::NotCm));
    }
}
