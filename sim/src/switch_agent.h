// The telemetry side of a switch (and of a collector server): the four telemetry applications
// that turn forwarded user packets into DTA reports ([InvisiFlow §6.1] "Sources"), and the four
// channels that carry them to the collector ([InvisiFlow §6.1] "Channels", §3-§4).
#pragma once

#include <deque>
#include <memory>
#include <random>
#include <unordered_set>
#include <vector>

#include "dta/dta.h"
#include "fabric.h"
#include "if_frames.h"
#include "sim_context.h"

namespace ifsim {

/// One encoded entry (a whole DTA datagram of one report) waiting in a telemetry buffer.
struct Entry {
  uint16_t len = 0;
  uint8_t bytes[64];
  uint32_t Framed() const { return len + 2u; }
};

class SwitchAgent : public ns3::IpL4Protocol {
 public:
  static ns3::TypeId GetTypeId();
  SwitchAgent(Sim* sim, uint32_t node, bool collector);

  /// Starts the periodic work (load reports, seeds) once the ports are known.
  void Start();

  /// A user packet forwarded out of `port` (called from routing, before TTL decrement).
  void OnForward(ns3::Ptr<const ns3::Packet> p, const ns3::Ipv4Header& h, uint32_t port);
  /// A user packet dropped at a full buffer.
  void OnUserDrop(ns3::Ptr<const ns3::QueueDiscItem> item);

  /// Late binding of the pull and seed bands (see IfQueueDisc).
  ns3::Ptr<ns3::QueueDiscItem> LateBind(uint32_t port, ns3::Ptr<ns3::QueueDiscItem> item,
                                        Band band);

  /// Flushes partially filled postcard-mode datagrams.
  void Flush();

  uint32_t BufferedBytes() const { return buf_bytes_; }
  uint32_t peak_bytes = 0;

  // IpL4Protocol
  int GetProtocolNumber() const override { return kIfProto; }
  RxStatus Receive(ns3::Ptr<ns3::Packet> p, const ns3::Ipv4Header& h,
                   ns3::Ptr<ns3::Ipv4Interface> iface) override;
  RxStatus Receive(ns3::Ptr<ns3::Packet>, const ns3::Ipv6Header&,
                   ns3::Ptr<ns3::Ipv6Interface>) override {
    return RX_ENDPOINT_UNREACH;
  }
  void SetDownTarget(DownTargetCallback cb) override { down_ = cb; }
  void SetDownTarget6(DownTargetCallback6) override {}
  DownTargetCallback GetDownTarget() const override { return down_; }
  DownTargetCallback6 GetDownTarget6() const override { return {}; }

 private:
  uint32_t NextSeq(App app);
  void Emit(const uint8_t* dgram, size_t len);
  void EmitPostcard(const FlowKey& flow, uint8_t hop, uint8_t path_len);
  void EmitPortBytes(uint32_t port, uint32_t period, uint64_t bytes);
  void EmitDueColumns(uint32_t half);
  void EmitDrop(uint64_t flow);
  void LoadTick();
  void SeedTick(uint32_t port);
  bool Pulling() const;
  bool SeedsOn(uint32_t port) const;
  uint32_t Usage() const;
  bool ShouldSend(uint32_t port, uint32_t requester_usage) const;
  ns3::Ptr<ns3::Packet> PopFrame();
  ns3::Ptr<ns3::Packet> ControlFrame(FrameType t, uint8_t flags, uint32_t usage);
  void SendFrame(uint32_t port, ns3::Ptr<ns3::Packet> p);
  ns3::Ptr<ns3::QueueDiscItem> Rebuild(ns3::Ptr<ns3::QueueDiscItem> like, ns3::Ptr<ns3::Packet> p);
  void StoreFrame(const uint8_t* payload, size_t len);
  void PushOut();
  void SendUdp();

  Sim* sim_;
  uint32_t node_;
  bool collector_;
  Role role_;
  ns3::Ptr<ns3::Ipv4L3Protocol> ipv4_;
  DownTargetCallback down_;
  std::mt19937_64 rng_;
  uint32_t seq_ = 0;
  // telemetry buffer of the pull-based channels
  std::deque<Entry> buf_;
  uint32_t buf_bytes_ = 0;
  // postcard-mode datagram being filled
  std::vector<uint8_t> pending_;
  uint32_t pending_count_ = 0;
  ns3::Ptr<ns3::Socket> udp_;
  // applications
  std::unordered_set<uint64_t> flows_seen_;
  std::vector<uint64_t> port_bytes_;
  // Per-flow accounting, core switches only: one ApproSync Count-Min per half (the library's
  // dta_approsync: the sketch, the divergence rule, the due columns).
  struct ApproSyncFree {
    void operator()(dta_approsync* s) const { dta_approsync_free(s); }
  };
  std::unique_ptr<dta_approsync, ApproSyncFree> cms_[kCmsHalves];
  int32_t core_index_ = -1;
  uint32_t sw_ = 0;     // switch id: 0.. ToRs, then aggregation, then core switches
  uint32_t drops_ = 0;  // drop notices sent
};

}  // namespace ifsim
