#include "fabric.h"

#include <deque>

#include "if_frames.h"
#include "switch_agent.h"

using namespace ns3;

namespace ifsim {

uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

uint64_t FlowKey::Id() const {
  uint64_t a = (static_cast<uint64_t>(src) << 32) | dst;
  uint64_t b = (static_cast<uint64_t>(sport) << 24) | (static_cast<uint64_t>(dport) << 8) | proto;
  return Mix64(a ^ Mix64(b + 0x9e3779b97f4a7c15ULL));
}

void FlowKey::Encode(uint8_t* o) const {
  PutU32(o, src);
  PutU32(o + 4, dst);
  PutU16(o + 8, sport);
  PutU16(o + 10, dport);
  o[12] = proto;
}

FlowKey FlowKey::Decode(const uint8_t* in) {
  FlowKey k;
  k.src = GetU32(in);
  k.dst = GetU32(in + 4);
  k.sport = GetU16(in + 8);
  k.dport = GetU16(in + 10);
  k.proto = in[12];
  return k;
}

void EncodePortPeriodKey(uint8_t* out, uint32_t sw, uint32_t port, uint32_t period) {
  PutU32(out, sw);
  PutU16(out + 4, static_cast<uint16_t>(port));
  PutU16(out + 6, static_cast<uint16_t>(period));
}

FlowKey ReadFlowKey(const Ipv4Header& h, Ptr<const Packet> p) {
  FlowKey k;
  k.src = h.GetSource().Get();
  k.dst = h.GetDestination().Get();
  k.proto = h.GetProtocol();
  if ((k.proto == 6 || k.proto == 17) && p->GetSize() >= 4) {
    uint8_t b[4];
    p->CopyData(b, 4);
    k.sport = static_cast<uint16_t>((b[0] << 8) | b[1]);
    k.dport = static_cast<uint16_t>((b[2] << 8) | b[3]);
  }
  return k;
}

// ---------------------------------------------------------------------------------------------
// IfQueueDisc

bool g_low_priority_postcards = false;

NS_OBJECT_ENSURE_REGISTERED(IfQueueDisc);

TypeId IfQueueDisc::GetTypeId() {
  static TypeId tid = TypeId("ifsim::IfQueueDisc")
                          .SetParent<QueueDisc>()
                          .SetGroupName("TrafficControl")
                          .AddConstructor<IfQueueDisc>();
  return tid;
}

IfQueueDisc::IfQueueDisc() : QueueDisc(QueueDiscSizePolicy::NO_LIMITS) {}

Band IfQueueDisc::Classify(Ptr<const QueueDiscItem> item) {
  Ptr<const Ipv4QueueDiscItem> ip = DynamicCast<const Ipv4QueueDiscItem>(item);
  if (!ip) return Band::User;
  const Ipv4Header& h = ip->GetHeader();
  if (h.GetProtocol() == kIfProto) {
    uint8_t t = 0;
    if (item->GetPacket()->GetSize() >= 1) item->GetPacket()->CopyData(&t, 1);
    switch (static_cast<FrameType>(t)) {
      case FrameType::Seed:
        return Band::Seed;
      case FrameType::Pull:
      case FrameType::ReplyToken:
        return Band::Pull;
      case FrameType::Data:
        return Band::Telemetry;
    }
    return Band::Seed;
  }
  if (h.GetProtocol() == 17 && (h.GetTos() & 0xfc) == kTosLow) return Band::Telemetry;
  if (h.GetProtocol() == 17 && g_low_priority_postcards && item->GetPacket()->GetSize() >= 4) {
    uint8_t udp[4];
    item->GetPacket()->CopyData(udp, 4);
    if (((udp[2] << 8) | udp[3]) == kTelemetryPort) return Band::Telemetry;
  }
  return Band::User;
}

uint32_t IfQueueDisc::BandPackets(Band b) const {
  return GetInternalQueue(static_cast<uint32_t>(b))->GetNPackets();
}

bool IfQueueDisc::DoEnqueue(Ptr<QueueDiscItem> item) {
  Band b = Classify(item);
  uint32_t size = item->GetSize();
  switch (b) {
    case Band::User:
      if (buffers->user_bytes + size > buffers->user_cap) {
        buffers->user_drops++;
        if (on_user_drop) on_user_drop(item);
        DropBeforeEnqueue(item, "user buffer full");
        return false;
      }
      if (BandPackets(Band::User) >= ecn_k && Mark(item, "dctcp K")) buffers->ecn_marks++;
      buffers->user_bytes += size;
      break;
    case Band::Telemetry:
      if (buffers->telem_bytes + size > buffers->telem_cap) {
        buffers->telem_drops++;
        DropBeforeEnqueue(item, "telemetry buffer full");
        return false;
      }
      buffers->telem_bytes += size;
      break;
    case Band::Pull:
      if (BandPackets(Band::Pull) >= pull_depth) {
        DropBeforeEnqueue(item, "pull queue full");
        return false;
      }
      break;
    case Band::Seed:
      if (BandPackets(Band::Seed) >= seed_depth) {
        DropBeforeEnqueue(item, "seed queue full");
        return false;
      }
      break;
  }
  return GetInternalQueue(static_cast<uint32_t>(b))->Enqueue(item);
}

void IfQueueDisc::Release(Ptr<const QueueDiscItem> item, Band b) {
  if (b == Band::User) buffers->user_bytes -= item->GetSize();
  if (b == Band::Telemetry) buffers->telem_bytes -= item->GetSize();
}

Ptr<QueueDiscItem> IfQueueDisc::DoDequeue() {
  for (uint32_t i = 0; i < kBands; i++) {
    Band b = static_cast<Band>(i);
    while (Ptr<QueueDiscItem> item = GetInternalQueue(i)->Dequeue()) {
      Release(item, b);
      if (b == Band::User || b == Band::Telemetry || !late_bind) return item;
      Ptr<QueueDiscItem> out = late_bind(item, b);
      if (out) return out;
      DropAfterDequeue(item, "nothing to send");
    }
  }
  return nullptr;
}

bool IfQueueDisc::CheckConfig() {
  if (GetNQueueDiscClasses() > 0 || GetNPacketFilters() > 0) return false;
  if (GetNInternalQueues() == 0) {
    for (uint32_t i = 0; i < kBands; i++) {
      AddInternalQueue(CreateObjectWithAttributes<DropTailQueue<QueueDiscItem>>(
          "MaxSize", QueueSizeValue(QueueSize("1000000p"))));
    }
  }
  return buffers != nullptr;
}

void IfQueueDisc::InitializeParams() {}

// ---------------------------------------------------------------------------------------------
// Fabric

void Fabric::ComputeRoutes() {
  uint32_t n = NumNodes();
  next_hops.assign(n, std::vector<std::vector<uint16_t>>(NumServers()));
  std::vector<uint32_t> dist(n);
  for (uint32_t s = 0; s < NumServers(); s++) {
    std::fill(dist.begin(), dist.end(), UINT32_MAX);
    std::deque<uint32_t> q;
    dist[server_node[s]] = 0;
    q.push_back(server_node[s]);
    while (!q.empty()) {
      uint32_t u = q.front();
      q.pop_front();
      // Servers do not forward: only the destination server itself starts the search.
      if (role[u] == Role::Server && u != server_node[s]) continue;
      for (const Port& p : ports[u]) {
        if (dist[p.peer] == UINT32_MAX) {
          dist[p.peer] = dist[u] + 1;
          q.push_back(p.peer);
        }
      }
    }
    for (uint32_t u = 0; u < n; u++) {
      for (uint16_t i = 0; i < ports[u].size(); i++) {
        uint32_t v = ports[u][i].peer;
        if (dist[v] != UINT32_MAX && dist[v] + 1 == dist[u] &&
            (role[v] != Role::Server || v == server_node[s]))
          next_hops[u][s].push_back(i);
      }
    }
  }
}

void Fabric::ComputeCollectorDistances(const std::vector<uint32_t>& collector_nodes) {
  dist_collector.assign(NumNodes(), UINT32_MAX);
  std::deque<uint32_t> q;
  for (uint32_t c : collector_nodes) {
    dist_collector[c] = 0;
    q.push_back(c);
  }
  while (!q.empty()) {
    uint32_t u = q.front();
    q.pop_front();
    if (role[u] == Role::Server && dist_collector[u] != 0) continue;
    for (const Port& p : ports[u]) {
      if (dist_collector[p.peer] == UINT32_MAX) {
        dist_collector[p.peer] = dist_collector[u] + 1;
        q.push_back(p.peer);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// FabricRouting

TypeId FabricRouting::GetTypeId() {
  static TypeId tid =
      TypeId("ifsim::FabricRouting").SetParent<Ipv4RoutingProtocol>().SetGroupName("Internet");
  return tid;
}

FabricRouting::FabricRouting(Fabric* fabric, uint32_t node, bool hash_dst_only, uint64_t seed)
    : fabric_(fabric), node_(node), hash_dst_only_(hash_dst_only), rng_(seed) {}

int32_t FabricRouting::PickPort(const Ipv4Header& h, Ptr<const Packet> p, bool spray) {
  uint32_t dst = h.GetDestination().Get();
  auto it = fabric_->addr_server.find(dst);
  if (it == fabric_->addr_server.end()) {
    // A neighbour's link address: the port facing it.
    auto nt = fabric_->addr_node.find(dst);
    if (nt == fabric_->addr_node.end()) return -1;
    const auto& ps = fabric_->ports[node_];
    for (uint32_t i = 0; i < ps.size(); i++)
      if (ps[i].peer == nt->second) return static_cast<int32_t>(i);
    return -1;
  }
  const auto& hops = fabric_->next_hops[node_][it->second];
  if (hops.empty()) return -1;
  if (hops.size() == 1) return hops[0];
  uint64_t h64;
  if (spray) {
    h64 = rng_();
  } else if (hash_dst_only_) {
    h64 = Mix64(dst ^ (static_cast<uint64_t>(node_) << 40));
  } else {
    h64 = Mix64(ReadFlowKey(h, p).Id() ^ (static_cast<uint64_t>(node_) << 40));
  }
  return hops[h64 % hops.size()];
}

Ptr<Ipv4Route> FabricRouting::RouteOutput(Ptr<Packet> p, const Ipv4Header& header,
                                          Ptr<NetDevice>, Socket::SocketErrno& sockerr) {
  // Telemetry datagrams leaving a switch are sprayed; anything a server sends follows its link.
  bool spray = fabric_->role[node_] != Role::Server;
  int32_t port = -1;
  if (p) {
    port = PickPort(header, p, spray);
  } else {
    port = PickPort(header, Create<Packet>(), spray);
  }
  if (port < 0) {
    sockerr = Socket::ERROR_NOROUTETOHOST;
    return nullptr;
  }
  sockerr = Socket::ERROR_NOTERROR;
  const Port& pt = fabric_->ports[node_][port];
  Ptr<Ipv4Route> r = Create<Ipv4Route>();
  r->SetDestination(header.GetDestination());
  r->SetSource(pt.local);
  r->SetGateway(pt.remote);
  r->SetOutputDevice(pt.dev);
  return r;
}

bool FabricRouting::RouteInput(Ptr<const Packet> p, const Ipv4Header& header,
                               Ptr<const NetDevice> idev, UnicastForwardCallback ucb,
                               MulticastForwardCallback, LocalDeliverCallback lcb,
                               ErrorCallback ecb) {
  int32_t iif = ipv4_->GetInterfaceForDevice(idev);
  if (ipv4_->IsDestinationAddress(header.GetDestination(), iif)) {
    lcb(p, header, iif);
    return true;
  }
  bool telemetry = header.GetProtocol() == 17;
  int32_t port = PickPort(header, p, telemetry);
  if (port < 0) {
    ecb(p, header, Socket::ERROR_NOROUTETOHOST);
    return true;
  }
  const Port& pt = fabric_->ports[node_][port];
  if (agent && header.GetProtocol() == 6) agent->OnForward(p, header, static_cast<uint32_t>(port));
  ucb(pt.route, p, header);
  return true;
}

}  // namespace ifsim
