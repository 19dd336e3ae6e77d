// The simulated data-center fabric of the InvisiFlow reproduction ([InvisiFlow §6.1]): a FatTree
// with 4:1 oversubscription at the ToRs, per-flow ECMP routing on the 5-tuple, and the per-port
// four-band strict-priority queue disc (user / telemetry / pulls / seeds, [InvisiFlow §4.1]) with
// per-switch shared buffers, user and telemetry buffers isolated from each other.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/traffic-control-module.h"

namespace ifsim {

/// The four strict-priority bands of every port, highest first ([InvisiFlow §4.1]).
enum class Band : uint8_t { User = 0, Telemetry = 1, Pull = 2, Seed = 3 };
constexpr uint32_t kBands = 4;

/// IP protocol number of the per-hop InvisiFlow frames (253: experimentation, RFC 3692).
constexpr uint8_t kIfProto = 253;
/// IPv4 TOS of low-priority telemetry datagrams (DSCP CS1, "lower effort").
constexpr uint8_t kTosLow = 0x20;
/// UDP port telemetry datagrams are sent to in postcard mode (the DTA port).
constexpr uint16_t kTelemetryPort = 40040;

/// Postcard-mode telemetry datagrams (UDP to kTelemetryPort) go to the telemetry band, not the
/// user band (the low-priority UDP channel).
extern bool g_low_priority_postcards;

/// Per-switch shared buffers: one for user packets over all ports, one for telemetry queued in
/// the telemetry band ([InvisiFlow §6.1]: "shared by all ports ... fully isolated").
struct SharedBuffers {
  uint64_t user_cap = 0;
  uint64_t user_bytes = 0;
  uint64_t telem_cap = 0;
  uint64_t telem_bytes = 0;
  uint64_t user_drops = 0;
  uint64_t telem_drops = 0;
  uint64_t ecn_marks = 0;
};

/// The four-band strict-priority queue disc. User packets are ECN-marked (DCTCP step marking) when
/// the port's user band holds more than K packets; pull and seed bands are shallow; items of the
/// pull and seed bands are handed to `late_bind` when the port is free, which returns what to
/// send instead (a pull carrying the current buffer usage, a telemetry frame popped from the
/// switch's buffer) or nothing ([InvisiFlow §4.1] "late binding").
class IfQueueDisc : public ns3::QueueDisc {
 public:
  static ns3::TypeId GetTypeId();
  IfQueueDisc();
  ~IfQueueDisc() override = default;

  SharedBuffers* buffers = nullptr;
  uint32_t ecn_k = 65;
  uint32_t pull_depth = 4;
  uint32_t seed_depth = 1;
  std::function<ns3::Ptr<ns3::QueueDiscItem>(ns3::Ptr<ns3::QueueDiscItem>, Band)> late_bind;
  std::function<void(ns3::Ptr<const ns3::QueueDiscItem>)> on_user_drop;

  /// Packets waiting in one band.
  uint32_t BandPackets(Band b) const;

  static Band Classify(ns3::Ptr<const ns3::QueueDiscItem> item);

 private:
  bool DoEnqueue(ns3::Ptr<ns3::QueueDiscItem> item) override;
  ns3::Ptr<ns3::QueueDiscItem> DoDequeue() override;
  bool CheckConfig() override;
  void InitializeParams() override;
  void Release(ns3::Ptr<const ns3::QueueDiscItem> item, Band b);
};

/// One port of a node: the device, its queue disc, the neighbour across the link.
struct Port {
  uint32_t if_index = 0;  // IPv4 interface index
  ns3::Ptr<ns3::NetDevice> dev;
  ns3::Ptr<IfQueueDisc> qdisc;
  uint32_t peer = 0;  // node index of the neighbour
  ns3::Ipv4Address local;
  ns3::Ipv4Address remote;
  ns3::Ptr<ns3::Ipv4Route> route;  // one-hop route to the neighbour
  uint64_t bps = 0;
};

enum class Role : uint8_t { Server, Tor, Agg, Core };

/// The topology: nodes, ports, shortest-path next hops to every server, distances to collectors.
struct Fabric {
  uint32_t pods = 0, tors_per_pod = 0, hosts_per_tor = 0, aggs_per_pod = 0, cores = 0;  // SimConfig's
  std::vector<Role> role;
  std::vector<std::vector<Port>> ports;          // per node
  std::vector<uint32_t> server_node;             // server index -> node index
  std::vector<int32_t> node_server;              // node index -> server index or -1
  std::vector<uint32_t> server_tor;              // server index -> ToR node
  std::unordered_map<uint32_t, uint32_t> addr_server;  // server address -> server index
  std::unordered_map<uint32_t, uint32_t> addr_node;    // any interface address -> node index
  // next_hops[node][server] = port indices on shortest paths toward the server
  std::vector<std::vector<std::vector<uint16_t>>> next_hops;
  std::vector<uint32_t> dist_collector;  // hops to the nearest collector (per node)
  std::vector<uint32_t> hops_between;    // switches on the path server a -> b (flattened)

  uint32_t NumNodes() const { return static_cast<uint32_t>(role.size()); }
  uint32_t NumServers() const { return static_cast<uint32_t>(server_node.size()); }
  uint32_t Rack(uint32_t server) const { return server / hosts_per_tor; }
  uint32_t Pod(uint32_t server) const { return server / (hosts_per_tor * tors_per_pod); }
  /// Switches on a shortest path between two servers (1 same rack, 3 same pod, 5 otherwise).
  uint32_t PathSwitches(uint32_t a, uint32_t b) const {
    if (Rack(a) == Rack(b)) return 1;
    if (Pod(a) == Pod(b)) return 3;
    return 5;
  }
  void ComputeRoutes();
  void ComputeCollectorDistances(const std::vector<uint32_t>& collector_nodes);
};

class SwitchAgent;

/// Per-node routing: local delivery, per-flow ECMP on the 5-tuple over the shortest-path next
/// hops (or on the destination only in the load-imbalance stress case), per-packet spraying of
/// postcard-mode telemetry datagrams ([InvisiFlow §6.1] "packet spraying").
class FabricRouting : public ns3::Ipv4RoutingProtocol {
 public:
  static ns3::TypeId GetTypeId();
  FabricRouting(Fabric* fabric, uint32_t node, bool hash_dst_only, uint64_t seed);

  ns3::Ptr<ns3::Ipv4Route> RouteOutput(ns3::Ptr<ns3::Packet> p, const ns3::Ipv4Header& header,
                                       ns3::Ptr<ns3::NetDevice> oif,
                                       ns3::Socket::SocketErrno& sockerr) override;
  bool RouteInput(ns3::Ptr<const ns3::Packet> p, const ns3::Ipv4Header& header,
                  ns3::Ptr<const ns3::NetDevice> idev, UnicastForwardCallback ucb,
                  MulticastForwardCallback mcb, LocalDeliverCallback lcb,
                  ErrorCallback ecb) override;
  void NotifyInterfaceUp(uint32_t) override {}
  void NotifyInterfaceDown(uint32_t) override {}
  void NotifyAddAddress(uint32_t, ns3::Ipv4InterfaceAddress) override {}
  void NotifyRemoveAddress(uint32_t, ns3::Ipv4InterfaceAddress) override {}
  void SetIpv4(ns3::Ptr<ns3::Ipv4> ipv4) override { ipv4_ = ipv4; }
  void PrintRoutingTable(ns3::Ptr<ns3::OutputStreamWrapper>, ns3::Time::Unit) const override {}

  SwitchAgent* agent = nullptr;  // telemetry sources on forwarded user packets

 private:
  int32_t PickPort(const ns3::Ipv4Header& h, ns3::Ptr<const ns3::Packet> p, bool spray);
  Fabric* fabric_;
  uint32_t node_;
  bool hash_dst_only_;
  std::mt19937_64 rng_;
  ns3::Ptr<ns3::Ipv4> ipv4_;
};

/// Flow identity of a TCP/UDP packet whose IP header was removed: (src, dst, proto, ports).
struct FlowKey {
  uint32_t src = 0, dst = 0;
  uint16_t sport = 0, dport = 0;
  uint8_t proto = 0;
  uint64_t Id() const;
  /// The 13-byte key of the Postcarding store: src, dst, sport, dport, protocol (big-endian).
  void Encode(uint8_t* out) const;
  static FlowKey Decode(const uint8_t* in);
};
constexpr size_t kFlowKeyLen = 13;

/// Key-Increment reports carry the stores' redundancy (examples/invisiflow.toml).
constexpr unsigned kKeyIncrementRedundancy = 2;

/// Ground-truth key of one port's bytes in one period; and the 8-byte store key
/// (switch u32 | port u16 | period u16).
inline uint64_t PortPeriodKey(uint32_t sw, uint32_t port, uint32_t period) {
  return (static_cast<uint64_t>(sw) << 32) | (static_cast<uint64_t>(port & 0xffff) << 16) |
         (period & 0xffff);
}
void EncodePortPeriodKey(uint8_t* out, uint32_t sw, uint32_t port, uint32_t period);
FlowKey ReadFlowKey(const ns3::Ipv4Header& h, ns3::Ptr<const ns3::Packet> p);

uint64_t Mix64(uint64_t x);

/// A time of `us` microseconds, fractions kept (ns-3's MicroSeconds takes an integer).
inline ns3::Time Us(double us) { return ns3::NanoSeconds(static_cast<int64_t>(us * 1000.0 + 0.5)); }

}  // namespace ifsim
