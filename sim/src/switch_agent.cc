#include "switch_agent.h"

#include <algorithm>

#define DTA_NO_SOCKETS
#include "dta/reporter.h"
#include "if_frames.h"

using namespace ns3;

namespace ifsim {

namespace {
// Key shapes of the applications' reports (examples/invisiflow.toml):
//   path tracing     Postcarding "paths", key = the 5-tuple (13 bytes), value = switch id
//   load imbalance   Key-Increment "portbytes", key = switch u32 | port u16 | period u16, bytes
//   flow accounting  Sketch-Merge (ApproSync) "flowsync0/1", one Count-Min column: 3 counters
//   drop notices     Append "drops", list = switch id, flow id u32 | drop number u32 | time ns u64

void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; i--) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}
}  // namespace

TypeId SwitchAgent::GetTypeId() {
  static TypeId tid = TypeId("ifsim::SwitchAgent").SetParent<IpL4Protocol>().SetGroupName("Internet");
  return tid;
}

SwitchAgent::SwitchAgent(Sim* sim, uint32_t node, bool collector)
    : sim_(sim), node_(node), collector_(collector), rng_(Mix64(sim->cfg.seed * 7919 + node)) {
  role_ = sim->fabric.role[node];
  sw_ = role_ == Role::Server ? 0 : node - sim->fabric.NumServers();
  port_bytes_.assign(sim->fabric.ports[node].size(), 0);
  if (role_ == Role::Core) {
    auto it = std::find(sim->core_nodes.begin(), sim->core_nodes.end(), node);
    core_index_ = static_cast<int32_t>(it - sim->core_nodes.begin());
    for (uint32_t half = 0; half < kCmsHalves; half++) {
      dta_approsync* a = nullptr;
      if (dta_approsync_new(kCmsRows, kCmsHalfCols, sim->cfg.approsync_theta,
                            static_cast<uint16_t>(kCmsSketchId + half), kCmsEpoch,
                            &a) != DTA_E_OK)
        NS_FATAL_ERROR("dta_approsync_new: " << dta_last_error());
      cms_[half].reset(a);
    }
  }
}

bool SwitchAgent::Pulling() const {
  return sim_->cfg.channel == Channel::Pull || sim_->cfg.channel == Channel::InvisiFlow;
}

void SwitchAgent::Start() {
  Ptr<Node> n = NodeList::GetNode(node_);
  ipv4_ = n->GetObject<Ipv4L3Protocol>();
  Channel ch = sim_->cfg.channel;
  if (ch == Channel::None) return;
  if (role_ != Role::Server) {
    if (ch == Channel::DefaultUdp || ch == Channel::LowUdp) {
      udp_ = Socket::CreateSocket(n, UdpSocketFactory::GetTypeId());
      udp_->Bind();
      if (ch == Channel::LowUdp) udp_->SetIpTos(kTosLow);
    }
    double first = sim_->TelemStartUs();
    Simulator::Schedule(Us(first), &SwitchAgent::LoadTick, this);
  }
  if (Pulling()) {
    for (uint32_t i = 0; i < sim_->fabric.ports[node_].size(); i++) {
      if (!SeedsOn(i)) continue;
      // Desynchronise the ports' seed clocks.
      double off = std::uniform_real_distribution<double>(0, sim_->cfg.seed_period_us)(rng_);
      Simulator::Schedule(Us(off), &SwitchAgent::SeedTick, this, i);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sources

uint32_t SwitchAgent::NextSeq(App app) {
  sim_->gt.log.Generated(dta_sim::EntryId(sw_, seq_), app, Simulator::Now());
  return seq_++;
}

void SwitchAgent::OnForward(Ptr<const Packet> p, const Ipv4Header& h, uint32_t port) {
  uint32_t bytes = p->GetSize() + h.GetSerializedSize();
  port_bytes_[port] += bytes;
  if (!sim_->TelemetryOn()) return;
  FlowKey k = ReadFlowKey(h, p);
  uint64_t flow = k.Id();
  if (flows_seen_.insert(flow).second) {
    auto s = sim_->fabric.addr_server.find(k.src);
    auto d = sim_->fabric.addr_server.find(k.dst);
    if (s != sim_->fabric.addr_server.end() && d != sim_->fabric.addr_server.end()) {
      uint8_t hop = static_cast<uint8_t>(64 - h.GetTtl());
      uint8_t len = static_cast<uint8_t>(sim_->fabric.PathSwitches(s->second, d->second));
      if (hop < len) {
        PathRecord& pr = sim_->gt.paths[flow];
        pr.len = len;
        pr.seen |= static_cast<uint8_t>(1u << hop);
        pr.sw[hop] = sw_;
        pr.key = k;
        EmitPostcard(k, hop, len);
      }
    }
  }
  if (core_index_ >= 0) {
    GroundTruth::FlowCount& fc = sim_->gt.flow_packets[flow];
    fc.key = k;
    fc.packets++;
    // ApproSync ([InvisiFlow §6.1]): a column is synced when one of its counters has diverged
    // from the value last sent by theta of that value (at least 1).
    uint8_t key[kFlowKeyLen];
    k.Encode(key);
    uint32_t half = CmsHalfOf(key, sizeof key);
    int due = 0;
    if (dta_approsync_update(cms_[half].get(), key, sizeof key, 1, &due) != DTA_E_OK)
      NS_FATAL_ERROR("dta_approsync_update: " << dta_last_error());
    if (due) EmitDueColumns(half);
  }
}

void SwitchAgent::OnUserDrop(Ptr<const QueueDiscItem> item) {
  if (!sim_->TelemetryOn() || role_ == Role::Server) return;
  Ptr<const Ipv4QueueDiscItem> ip = DynamicCast<const Ipv4QueueDiscItem>(item);
  if (!ip || ip->GetHeader().GetProtocol() != 6) return;  // user (TCP) packets only
  sim_->gt.drops_generated++;
  // Not from inside the queue disc's enqueue: the report may itself be enqueued on this port.
  Simulator::ScheduleNow(&SwitchAgent::EmitDrop, this,
                         ReadFlowKey(ip->GetHeader(), item->GetPacket()).Id());
}

void SwitchAgent::LoadTick() {
  double now = Simulator::Now().GetSeconds() * 1e6;
  if (now >= sim_->TelemEndUs()) {
    Flush();
    return;
  }
  uint32_t period =
      static_cast<uint32_t>((now - sim_->TelemStartUs()) / sim_->cfg.load_report_us + 0.5);
  uint64_t core_total = 0;
  for (uint32_t i = 0; i < port_bytes_.size(); i++) {
    if (port_bytes_[i] == 0) continue;
    if (now > sim_->TelemStartUs()) {
      core_total += port_bytes_[i];
      uint64_t key = PortPeriodKey(sw_, i, period);
      sim_->gt.port_bytes[key] += port_bytes_[i];
      EmitPortBytes(i, period, port_bytes_[i]);
    }
    port_bytes_[i] = 0;
  }
  if (core_index_ >= 0 && now > sim_->TelemStartUs())
    sim_->gt.core_load[core_index_][period] += core_total;
  Flush();
  Simulator::Schedule(Us(sim_->cfg.load_report_us), &SwitchAgent::LoadTick, this);
}

void SwitchAgent::EmitPostcard(const FlowKey& flow, uint8_t hop, uint8_t path_len) {
  Entry e;
  dta_native_builder b;
  dta_native_begin(&b, e.bytes, sizeof e.bytes, DTA_PRIORITY_LOW, 0, sw_, NextSeq(App::PathTracing));
  uint8_t key[kFlowKeyLen];
  flow.Encode(key);
  dta_native_postcard(&b, 0, key, sizeof key, hop, path_len, sw_);
  Emit(e.bytes, dta_native_len(&b));
}

void SwitchAgent::EmitPortBytes(uint32_t port, uint32_t period, uint64_t bytes) {
  Entry e;
  dta_native_builder b;
  dta_native_begin(&b, e.bytes, sizeof e.bytes, DTA_PRIORITY_LOW, 0, sw_,
                   NextSeq(App::LoadImbalance));
  uint8_t key[8];
  EncodePortPeriodKey(key, sw_, port, period);
  dta_native_key_increment(&b, 0, kKeyIncrementRedundancy, key, sizeof key, bytes);
  Emit(e.bytes, dta_native_len(&b));
}

void SwitchAgent::EmitDueColumns(uint32_t half) {
  // Each due column with its current (cumulative) counters: the store merges what grew since
  // this switch's last delivered column, so a lost sync is healed by the next one.
  uint16_t col = 0;
  uint8_t data[4 * kCmsRows];
  size_t len = 0;
  int rc;
  while ((rc = dta_approsync_next_due(cms_[half].get(), &col, data, sizeof data, &len)) ==
         DTA_E_OK) {
    sim_->gt.RecordColumn(&sim_->gt.cms_generated, sw_, half, col, data);
    Entry e;
    dta_native_builder b;
    dta_native_begin(&b, e.bytes, sizeof e.bytes, DTA_PRIORITY_LOW, 0, sw_,
                     NextSeq(App::FlowSketch));
    dta_native_sketch_merge(&b, 0, static_cast<uint16_t>(kCmsSketchId + half), col, kCmsEpoch,
                            data, len);
    Emit(e.bytes, dta_native_len(&b));
  }
  if (rc != DTA_E_EMPTY) NS_FATAL_ERROR("dta_approsync_next_due: " << dta_last_error());
}

void SwitchAgent::EmitDrop(uint64_t flow) {
  Entry e;
  dta_native_builder b;
  dta_native_begin(&b, e.bytes, sizeof e.bytes, DTA_PRIORITY_LOW, 0, sw_, NextSeq(App::DropNotice));
  uint8_t data[16];
  PutU32(data, static_cast<uint32_t>(flow));
  PutU32(data + 4, drops_++);
  PutU64(data + 8, static_cast<uint64_t>(Simulator::Now().GetNanoSeconds()));
  dta_native_append(&b, 0, sw_, data, sizeof data);
  Emit(e.bytes, dta_native_len(&b));
}

// ---------------------------------------------------------------------------------------------
// Channels

void SwitchAgent::Emit(const uint8_t* dgram, size_t len) {
  Channel ch = sim_->cfg.channel;
  if (ch == Channel::DefaultUdp || ch == Channel::LowUdp) {
    size_t at = pending_.size();
    pending_.resize(at + 2 + len);
    PutU16(pending_.data() + at, static_cast<uint16_t>(len));
    std::copy(dgram, dgram + len, pending_.begin() + at + 2);
    if (++pending_count_ >= sim_->cfg.entries_per_packet) SendUdp();
    return;
  }
  Entry e;
  e.len = static_cast<uint16_t>(len);
  std::copy(dgram, dgram + len, e.bytes);
  if (buf_bytes_ + e.Framed() > sim_->cfg.telem_buf_bytes) {
    sim_->gt.lost_source_full++;
    return;
  }
  buf_.push_back(e);
  buf_bytes_ += e.Framed();
  peak_bytes = std::max(peak_bytes, buf_bytes_);
  if (ch == Channel::InvisiFlow) PushOut();
}

void SwitchAgent::SendUdp() {
  if (pending_count_ == 0) return;
  Ptr<Packet> p = Create<Packet>(pending_.data(), pending_.size());
  udp_->SendTo(p, 0, InetSocketAddress(sim_->collector_addr, kTelemetryPort));
  pending_.clear();
  pending_count_ = 0;
}

void SwitchAgent::Flush() {
  if (udp_) SendUdp();
}

uint32_t SwitchAgent::Usage() const {
  if (collector_) return 0;  // a collector is a true sink ([InvisiFlow §4.2])
  return buf_bytes_;
}

bool SwitchAgent::SeedsOn(uint32_t port) const {
  const Port& p = sim_->fabric.ports[node_][port];
  if (collector_) return true;  // collectors pull from their ToR
  if (sim_->fabric.role[p.peer] == Role::Server) return false;
  if (sim_->cfg.channel == Channel::Pull)
    return sim_->fabric.dist_collector[p.peer] > sim_->fabric.dist_collector[node_];
  return true;
}

void SwitchAgent::SeedTick(uint32_t port) {
  double now = Simulator::Now().GetSeconds() * 1e6;
  if (now > sim_->cfg.traffic_ms * 1000.0 + sim_->cfg.drain_ms * 1000.0) return;
  const Port& p = sim_->fabric.ports[node_][port];
  // Simulation shortcut: when neither end holds telemetry, the pull this seed would become can
  // only be answered with nothing, so it is not simulated.
  const SwitchAgent* peer = sim_->agents[p.peer];
  bool idle = Usage() == 0 && (peer == nullptr || peer->BufferedBytes() == 0);
  if (!idle && p.qdisc->BandPackets(Band::Seed) == 0)
    SendFrame(port, ControlFrame(FrameType::Seed, 0, 0));
  double period = collector_ ? sim_->cfg.collector_seed_period_us : sim_->cfg.seed_period_us;
  Simulator::Schedule(Us(period), &SwitchAgent::SeedTick, this, port);
}

Ptr<Packet> SwitchAgent::ControlFrame(FrameType t, uint8_t flags, uint32_t usage) {
  uint8_t b[kFrameHeader] = {static_cast<uint8_t>(t), flags, 0, 0, 0, 0, 0, 0};
  PutU32(b + 4, usage);
  return Create<Packet>(b, sizeof b);
}

void SwitchAgent::SendFrame(uint32_t port, Ptr<Packet> p) {
  const Port& pt = sim_->fabric.ports[node_][port];
  ipv4_->Send(p, pt.local, pt.remote, kIfProto, pt.route);
}

Ptr<Packet> SwitchAgent::PopFrame() {
  std::vector<uint8_t> out(kFrameHeader);
  uint32_t n = 0;
  while (!buf_.empty() && n < sim_->cfg.entries_per_packet) {
    const Entry& e = buf_.front();
    size_t at = out.size();
    out.resize(at + e.Framed());
    PutU16(out.data() + at, e.len);
    std::copy(e.bytes, e.bytes + e.len, out.begin() + at + 2);
    buf_bytes_ -= e.Framed();
    buf_.pop_front();
    n++;
  }
  out[0] = static_cast<uint8_t>(FrameType::Data);
  out[1] = static_cast<uint8_t>(n);
  PutU32(out.data() + 4, buf_bytes_);
  return Create<Packet>(out.data(), out.size());
}

Ptr<QueueDiscItem> SwitchAgent::Rebuild(Ptr<QueueDiscItem> like, Ptr<Packet> p) {
  Ptr<Ipv4QueueDiscItem> ip = DynamicCast<Ipv4QueueDiscItem>(like);
  Ipv4Header h = ip->GetHeader();
  h.SetPayloadSize(p->GetSize());
  return Create<Ipv4QueueDiscItem>(p, like->GetAddress(), like->GetProtocol(), h);
}

bool SwitchAgent::ShouldSend(uint32_t port, uint32_t requester_usage) const {
  if (buf_.empty()) return false;
  const Port& p = sim_->fabric.ports[node_][port];
  if (sim_->cfg.channel == Channel::Pull) return true;  // pulls only come from closer switches
  // [InvisiFlow §4.1] gradient with a slope: a requester closer to the collector takes data when
  // it holds less; one at the same distance or farther only when it holds a slope less.
  bool closer = sim_->fabric.dist_collector[p.peer] < sim_->fabric.dist_collector[node_];
  uint32_t mine = Usage();
  if (closer) return requester_usage < mine;
  return requester_usage + sim_->cfg.slope_bytes <= mine;
}

Ptr<QueueDiscItem> SwitchAgent::LateBind(uint32_t port, Ptr<QueueDiscItem> item, Band band) {
  uint8_t hdr[kFrameHeader];
  if (item->GetPacket()->GetSize() < kFrameHeader) return nullptr;
  item->GetPacket()->CopyData(hdr, kFrameHeader);
  FrameType t = static_cast<FrameType>(hdr[0]);
  if (band == Band::Seed && t == FrameType::Seed) {
    uint32_t usage = Usage();
    if (sim_->cfg.channel == Channel::Pull) {
      if (usage >= sim_->cfg.pull_threshold * sim_->cfg.telem_buf_bytes) return nullptr;
    } else if (!collector_) {
      // [InvisiFlow §4.1]: seeds are dropped with probability equal to the buffer usage.
      double u = static_cast<double>(usage) / sim_->cfg.telem_buf_bytes;
      if (std::uniform_real_distribution<double>(0, 1)(rng_) < u) return nullptr;
    }
    return Rebuild(item, ControlFrame(FrameType::Pull, 0, usage));
  }
  if (band == Band::Pull && t == FrameType::ReplyToken) {
    uint32_t requester = GetU32(hdr + 4);
    if (ShouldSend(port, requester)) return Rebuild(item, PopFrame());
    // Reflect the pull once: the requester may hold more than this switch and push to it.
    const Port& p = sim_->fabric.ports[node_][port];
    if (sim_->cfg.channel == Channel::InvisiFlow && !(hdr[1] & kFlagReflected) && !collector_ &&
        sim_->fabric.role[p.peer] != Role::Server && requester > Usage())
      return Rebuild(item, ControlFrame(FrameType::Pull, kFlagReflected, Usage()));
    return nullptr;
  }
  if (band == Band::Pull && t == FrameType::Pull) return item;  // a reflected pull, sent as is
  return nullptr;
}

IpL4Protocol::RxStatus SwitchAgent::Receive(Ptr<Packet> p, const Ipv4Header&,
                                            Ptr<Ipv4Interface> iface) {
  uint32_t size = p->GetSize();
  if (size < kFrameHeader) return RX_OK;
  std::vector<uint8_t> buf(size);
  p->CopyData(buf.data(), size);
  int32_t ifi = ipv4_->GetInterfaceForDevice(iface->GetDevice());
  uint32_t port = 0;
  const auto& ports = sim_->fabric.ports[node_];
  for (; port < ports.size(); port++)
    if (static_cast<int32_t>(ports[port].if_index) == ifi) break;
  if (port == ports.size()) return RX_OK;
  switch (static_cast<FrameType>(buf[0])) {
    case FrameType::Pull: {
      if (collector_) return RX_OK;  // a collector never holds telemetry to give
      SendFrame(port, ControlFrame(FrameType::ReplyToken, buf[1], GetU32(buf.data() + 4)));
      break;
    }
    case FrameType::Data:
      if (collector_) {
        sim_->Deliver(buf.data() + kFrameHeader, size - kFrameHeader);
      } else {
        StoreFrame(buf.data() + kFrameHeader, size - kFrameHeader);
      }
      break;
    default:
      break;
  }
  return RX_OK;
}

void SwitchAgent::StoreFrame(const uint8_t* payload, size_t len) {
  size_t at = 0;
  while (at + 2 <= len) {
    uint16_t n = GetU16(payload + at);
    if (n > sizeof(Entry::bytes) || at + 2 + n > len) break;
    Entry e;
    e.len = n;
    std::copy(payload + at + 2, payload + at + 2 + n, e.bytes);
    at += 2 + n;
    if (buf_bytes_ + e.Framed() > sim_->cfg.telem_buf_bytes) {
      sim_->gt.lost_in_transit_full++;
      continue;
    }
    buf_.push_back(e);
    buf_bytes_ += e.Framed();
  }
  peak_bytes = std::max(peak_bytes, buf_bytes_);
  if (sim_->cfg.channel == Channel::InvisiFlow) PushOut();
}

void SwitchAgent::PushOut() {
  // [InvisiFlow §4.1]: above 95 % usage, push blindly toward the collector.
  const auto& ports = sim_->fabric.ports[node_];
  while (buf_bytes_ > sim_->cfg.push_threshold * sim_->cfg.telem_buf_bytes) {
    std::vector<uint32_t> closer;
    for (uint32_t i = 0; i < ports.size(); i++)
      if (sim_->fabric.dist_collector[ports[i].peer] < sim_->fabric.dist_collector[node_])
        closer.push_back(i);
    if (closer.empty()) return;
    uint32_t port = closer[rng_() % closer.size()];
    SendFrame(port, PopFrame());
  }
}

}  // namespace ifsim
