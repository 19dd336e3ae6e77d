// Shared state of one simulation run: configuration, the fabric, and the out-of-band ground truth
// of every telemetry entry generated and delivered ([InvisiFlow §6.2] "extensive out-of-band
// logging in the simulator").
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "fabric.h"
#include "ground_truth.h"

namespace ifsim {

enum class Channel : uint8_t { None, DefaultUdp, LowUdp, Pull, InvisiFlow };
const char* ChannelName(Channel c);
bool ParseChannel(const std::string& s, Channel* out);

/// The four telemetry applications ([InvisiFlow §6.1] "Sources") and the log of every entry
/// generated and delivered are the smoke run's (ground_truth.h): one ground-truth logger.
using dta_sim::App;
using dta_sim::AppName;
using dta_sim::kApps;

/// Count-Min shape of the per-flow accounting application ([InvisiFlow §6.1]: 3 x 2^17). A
/// Sketch-Merge column index is 16 bits on the wire, so the 2^17 columns are two ApproSync
/// Sketch-Merge stores of 2^16 ("flowsync0", "flowsync1" of examples/invisiflow.toml, sketch ids
/// kCmsSketchId + half): a flow counts in the half DTA's Count-Min hash picks (CmsCellsOf).
constexpr uint32_t kCmsRows = 3;
constexpr uint32_t kCmsHalves = 2;
constexpr uint32_t kCmsHalfCols = 1u << 16;
constexpr uint32_t kCmsCells = kCmsHalves * kCmsRows * kCmsHalfCols;
constexpr uint16_t kCmsSketchId = 3;
constexpr uint32_t kCmsEpoch = 1;  // one measurement epoch per run
/// Index of a counter in a switch's sketch (and in the ground truth's).
inline uint32_t CmsCell(uint32_t half, uint32_t row, uint32_t col) {
  return (half * kCmsRows + row) * kCmsHalfCols + col;
}
/// Where a flow counts: its half and its column per row.
struct CmsCells {
  uint32_t half = 0;
  uint32_t col[kCmsRows] = {};
};
/// DTA's Count-Min hash of the flow's 13-byte key (dta_sketch_cm_column, in dta_bridge.cc): the
/// columns the Sketch-Merge query reads.
CmsCells CmsCellsOf(const FlowKey& k);
/// The half of an encoded flow key (the row after the last, 2 columns, of DTA's hash).
uint32_t CmsHalfOf(const uint8_t* key, size_t len);
/// Bytes of a native DTA datagram header.
constexpr uint16_t DTA_HDR = 12;

struct SimConfig {
  Channel channel = Channel::InvisiFlow;
  // The FatTree (--scale): "small" (the default, for a 2-core machine) is 4 pods of 2 ToRs of 8
  // servers and 2 aggregation switches, 4 cores, 10 Gbps; "paper" is [InvisiFlow §6.1]'s 4 pods
  // of 3 ToRs of 12 servers and 3 aggregation switches, 9 cores, 100 Gbps (ApplyScale). Both are
  // 4:1 oversubscribed at the ToRs.
  std::string scale = "small";
  uint32_t pods = 4, tors_per_pod = 2, hosts_per_tor = 8, aggs_per_pod = 2, cores = 4;
  double load = 0.5;
  std::string workload_path;
  uint64_t seed = 1;
  double traffic_ms = 30.0;  // user flows arrive in [0, traffic_ms)
  double drain_ms = 20.0;    // then the run continues this long
  double telem_start = 0.2;  // telemetry applications run in [start, end) x traffic_ms
  double telem_end = 0.8;
  uint64_t link_bps = 10'000'000'000ULL;
  double link_delay_us = 1.0;
  // [InvisiFlow §6.1]: ~2 MB of user buffer per 600 Gbps of ports, 170 KB of telemetry buffer
  // per switch at 100 Gbps links; both scale with link bandwidth (17 KB at 10 Gbps).
  double user_buf_bytes_per_gbps = 2.0e6 / 600.0;
  uint32_t telem_buf_bytes = 17'000;
  uint32_t push_buf_bytes = 4'000;  // telemetry band of a pull-channel switch (push fallback)
  // DCTCP marking threshold in packets: [InvisiFlow §6.1]'s K = 65 at 100 Gbps is 7.8 us of
  // queue; scaled with the link rate like the buffers, 7 packets at 10 Gbps (65 unscaled queues
  // ten times longer in time and leaves telemetry fewer gaps: --ecn-k 65, docs/invisiflow.md).
  uint32_t ecn_k = 7;
  // Seeds: [InvisiFlow §4.1] fills every gap with pulls; simulated, a switch port seeds every
  // 1 us and a collector every 0.25 us (about one telemetry frame's time at 10 Gbps).
  double seed_period_us = 1.0;
  double collector_seed_period_us = 0.25;
  double load_report_us = 50.0;  // 5 us at 100 Gbps, scaled with link bandwidth
  double approsync_theta = 1.0;  // relative divergence that triggers a counter sync
  uint32_t entries_per_packet = 8;
  double push_threshold = 0.95;  // [InvisiFlow §4.1]
  double pull_threshold = 0.5;   // pull-based baseline ([InvisiFlow §6.1])
  uint32_t slope_bytes = 1500;   // gradient slope toward farther requesters
  bool imbalance = false;        // ECMP on the destination only ([InvisiFlow §6.1] stress)
  bool asymmetric = false;       // two links toward the collector at half capacity
  uint32_t collectors = 1;       // a second collector in another pod (Table 3)
  std::string dta_config;        // DTA collector configuration (TOML); empty: no DTA
  std::string dta_regions;       // its region directory (empty: the configuration's)
  std::string out_json;
  bool check = false;            // print "N checks, N failures" of the stores vs the ground truth
  std::string telemetry_log;     // optional CSV of every entry (ground truth)
};

/// Sets the fabric of scale `name` ("small" or "paper") and every parameter that scales with
/// the link rate (buffers, DCTCP's K, the load-report and seed periods) to its value there;
/// false for another name. Options given on the command line override these.
bool ApplyScale(const std::string& name, SimConfig* c);

struct PathRecord {
  uint8_t len = 0;
  uint8_t seen = 0;  // bit per hop generated
  std::array<uint32_t, 8> sw{};  // switch ids per hop
  FlowKey key;
};

struct GroundTruth {
  // Every entry generated and its first delivery, by (switch id, sequence number).
  dta_sim::GroundTruth log;
  std::unordered_map<uint64_t, PathRecord> paths;
  // load[core][period] = bytes through the core switch in the period
  std::vector<std::map<uint32_t, uint64_t>> core_load;
  // PortPeriodKey -> bytes reported (Key-Increment ground truth)
  std::unordered_map<uint64_t, uint64_t> port_bytes;
  struct FlowCount {
    FlowKey key;
    uint32_t packets = 0;
  };
  std::unordered_map<uint64_t, FlowCount> flow_packets;  // packets per flow through the cores
  // Count-Min counters per reporter (kCmsCells each, CmsCell): the largest value of each counter
  // in a column the reporter sent (generated; merged over reporters, the loss-free sketch) or
  // that reached a collector (delivered; the cross-check of the ApproSync store, which merges
  // the same way).
  using CmsByReporter = std::unordered_map<uint32_t, std::vector<uint32_t>>;
  CmsByReporter cms_generated;
  CmsByReporter cms_delivered;
  /// Note column `col` of half `half` from `reporter`: `data` is its kCmsRows big-endian
  /// counters as on the wire.
  static void RecordColumn(CmsByReporter* to, uint32_t reporter, uint32_t half, uint32_t col,
                           const uint8_t* data);
  /// The sketch merged over reporters (kCmsCells counters).
  static std::vector<uint64_t> Merged(const CmsByReporter& by);
  uint64_t drops_generated = 0;
  uint64_t drops_delivered = 0;
  uint64_t lost_source_full = 0;  // entries refused by a full telemetry buffer at generation
  uint64_t lost_in_transit_full = 0;
};

class SwitchAgent;

struct Sim {
  SimConfig cfg;
  Fabric fabric;
  GroundTruth gt;
  std::vector<SwitchAgent*> agents;  // per node (null for plain servers)
  std::vector<uint32_t> collector_nodes;
  std::vector<uint32_t> core_nodes;
  ns3::Ipv4Address collector_addr;   // postcard-mode destination
  std::function<void(const uint8_t*, size_t)> ingest;  // into the DTA collector
  // What reached a collector, decoded from the datagrams (the cross-check of the stores).
  std::unordered_map<uint64_t, uint8_t> delivered_hops;         // flow -> bit per hop
  std::unordered_map<uint64_t, uint64_t> delivered_port_bytes;  // PortPeriodKey -> bytes
  double TelemStartUs() const { return cfg.telem_start * cfg.traffic_ms * 1000.0; }
  double TelemEndUs() const { return cfg.telem_end * cfg.traffic_ms * 1000.0; }
  bool TelemetryOn() const;
  /// Records the delivery of a telemetry payload (length-prefixed DTA datagrams) at a collector
  /// and hands it to the DTA collector.
  void Deliver(const uint8_t* payload, size_t len);
};

}  // namespace ifsim
