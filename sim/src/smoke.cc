// The smoke run: a small ns-3 network sends telemetry of all four applications
// ([InvisiFlow §6.1] "Sources") for about 1 ms of simulated time to the collector node, whose
// DtaCollectorApp feeds it into real DTA stores; then every store is queried through the C ABI
// and its answers checked against the ground-truth log. Prints one line per check and
// "N checks, N failures" last; exits 1 on a failure.
//
//   dta-smoke [--config sim/smoke.toml] [--regions DIR] [--csv FILE]
//
// Topology: 4 telemetry sources ("switches" s0..s3) -- router -- collector, 10 Gbps, 1 us
// point-to-point links. Switch i has switch id i + 1 (Postcarding values); s0 and s1 are the
// Sketch-Merge reporters 0 and 1.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

#include "dta/dta.h"
#include "dta_collector_app.h"
#include "ground_truth.h"

using namespace ns3;
using dta_sim::App;

namespace {

constexpr uint16_t kTelemetryPort = 40040;
constexpr int kSwitches = 4;
constexpr int kFlows = 24;
constexpr int kPathLen = 3;
constexpr int kPorts = 2;
constexpr int kIntervals = 3;
constexpr int kDropsPerSwitch = 10;
constexpr int kSketchReporters = 2;
constexpr int kSketchRows = 3;

// The smoke's stores (sim/smoke.toml: the stores of examples/invisiflow.toml at a small size).
constexpr const char *kPaths = "paths";
constexpr const char *kPortBytes = "portbytes";
constexpr const char *kDrops = "drops";
const char *const kSketches[2] = {"flowsync0", "flowsync1"};
constexpr uint32_t kSketchColumns = 256;

using FlowKey = std::array<uint8_t, 13>;

FlowKey MakeFlow(int f) {
  // 10.0.0.f:1000+f -> 10.0.1.f:80 / TCP
  FlowKey k{10, 0, 0, static_cast<uint8_t>(f), 10, 0, 1, static_cast<uint8_t>(f),
            static_cast<uint8_t>((1000 + f) >> 8), static_cast<uint8_t>((1000 + f) & 0xff),
            0, 80, 6};
  return k;
}

void Check(int rc, const char *what) {
  if (rc != DTA_E_OK) {
    std::fprintf(stderr, "%s: %s (%s)\n", what, dta_last_error(), dta_error_name(rc));
    std::exit(2);
  }
}

// A telemetry source on a switch node: encodes each entry as one DTA datagram
// (dta_encode_*), logs it in the ground truth, and sends up to 8 per UDP packet to the
// collector node.
class TelemetrySource {
 public:
  TelemetrySource(Ptr<Node> node, uint32_t reporter_id, Ipv4Address collector,
                  dta_sim::GroundTruth *gt)
      : m_reporter(reporter_id), m_gt(gt) {
    m_socket = Socket::CreateSocket(node, UdpSocketFactory::GetTypeId());
    m_socket->Connect(InetSocketAddress(collector, kTelemetryPort));
  }

  // Encode one entry with `encode(header, buf, cap, &len)` and queue it.
  void Entry(App app, const std::function<int(const dta_header *, uint8_t *, size_t, size_t *)> &encode,
             const uint8_t *key, size_t key_len, uint64_t value, uint8_t hop = 0) {
    dta_header h{};
    h.reporter_id = m_reporter;
    h.seq = m_seq++;
    h.priority = DTA_PRIORITY_LOW;
    uint8_t buf[DTA_MAX_ENCODED];
    size_t len = 0;
    Check(encode(&h, buf, sizeof buf, &len), "encode");
    m_gt->Generated(dta_sim::EntryId(h.reporter_id, h.seq), app, Simulator::Now(), key, key_len,
                    value, hop);
    dta_sim::AppendFramed(m_payload, buf, len);
    if (++m_pending == dta_sim::kMaxDatagramsPerPacket) Send();
  }

  void Send() {
    if (m_pending == 0) return;
    m_socket->Send(Create<Packet>(m_payload.data(), m_payload.size()));
    m_payload.clear();
    m_pending = 0;
  }

 private:
  uint32_t m_reporter;
  uint32_t m_seq = 0;
  dta_sim::GroundTruth *m_gt;
  Ptr<Socket> m_socket;
  std::vector<uint8_t> m_payload;
  size_t m_pending = 0;
};

struct Checks {
  int passed = 0, failed = 0;
  void operator()(bool ok, const std::string &what) {
    std::printf("check %-58s %s\n", what.c_str(), ok ? "ok" : "FAILED");
    (ok ? passed : failed)++;
  }
};

std::string Hex(const uint8_t *p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

}  // namespace

int main(int argc, char **argv) {
  std::string config = "sim/smoke.toml";
  std::string regions;
  std::string csv;
  CommandLine cmd(__FILE__);
  cmd.AddValue("config", "DTA configuration (the stores)", config);
  cmd.AddValue("regions", "region directory (default: a fresh temporary one)", regions);
  cmd.AddValue("csv", "write the ground truth here", csv);
  cmd.Parse(argc, argv);
  namespace fs = std::filesystem;
  if (regions.empty()) {
    regions = (fs::temp_directory_path() / ("dta-smoke-" + std::to_string(::getpid()))).string();
  }
  // A fresh directory: the checks compare with this run's ground truth only.
  fs::remove_all(regions);

  // Topology: s0..s3 -- router -- collector.
  NodeContainer switches;
  switches.Create(kSwitches);
  Ptr<Node> router = CreateObject<Node>();
  Ptr<Node> collector = CreateObject<Node>();
  InternetStackHelper stack;
  stack.Install(switches);
  stack.Install(router);
  stack.Install(collector);
  PointToPointHelper p2p;
  p2p.SetDeviceAttribute("DataRate", StringValue("10Gbps"));
  p2p.SetChannelAttribute("Delay", StringValue("1us"));
  // The sketches go out as bursts of 64 packets per reporter: no loss is expected here.
  p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("10000p"));
  Ipv4AddressHelper addr;
  for (int i = 0; i < kSwitches; ++i) {
    NetDeviceContainer d = p2p.Install(switches.Get(i), router);
    addr.SetBase(Ipv4Address(("10.1." + std::to_string(i) + ".0").c_str()), "255.255.255.0");
    addr.Assign(d);
  }
  NetDeviceContainer dc = p2p.Install(router, collector);
  addr.SetBase("10.2.0.0", "255.255.255.0");
  Ipv4InterfaceContainer ic = addr.Assign(dc);
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  Ipv4Address collector_ip = ic.GetAddress(1);

  auto app = CreateObject<dta_sim::DtaCollectorApp>();
  try {
    app->Open(config, regions);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  app->SetPort(kTelemetryPort);
  collector->AddApplication(app);
  app->SetStartTime(Seconds(0));
  dta_sim::GroundTruth gt;
  app->SetDeliveredCallback([&gt](const dta_header &h, const uint8_t *, size_t) {
    gt.Delivered(dta_sim::EntryId(h.reporter_id, h.seq), Simulator::Now());
  });

  std::vector<std::unique_ptr<TelemetrySource>> src;
  for (int i = 0; i < kSwitches; ++i) {
    src.push_back(std::make_unique<TelemetrySource>(switches.Get(i), i, collector_ip, &gt));
  }

  // Expected answers, from what is generated.
  std::map<int, std::vector<uint32_t>> paths;             // flow -> switch ids, hop order
  std::map<std::array<uint8_t, 8>, uint64_t> port_bytes;  // key -> bytes
  std::map<int, uint64_t> flow_packets;                   // flow -> packets counted
  std::vector<std::vector<std::array<uint8_t, 16>>> drops(kSwitches);
  std::mt19937_64 rng(15);

  // Path tracing: flow f crosses switches f, f+1, f+2 (mod 4); each reports its hop at its
  // own time, spread over the first 0.5 ms.
  for (int f = 0; f < kFlows; ++f) {
    FlowKey k = MakeFlow(f);
    for (int hop = 0; hop < kPathLen; ++hop) {
      int sw = (f + hop) % kSwitches;
      uint32_t id = static_cast<uint32_t>(sw + 1);
      paths[f].push_back(id);
      Simulator::Schedule(MicroSeconds(10 + 20 * f + 5 * hop), [&, k, hop, sw, id]() {
        src[sw]->Entry(
            App::PathTracing,
            [&](const dta_header *h, uint8_t *b, size_t cap, size_t *len) {
              return dta_encode_postcard(h, k.data(), k.size(), static_cast<uint8_t>(hop),
                                         kPathLen, id, b, cap, len);
            },
            k.data(), k.size(), id, static_cast<uint8_t>(hop));
      });
    }
  }
  // Load imbalance: bytes per egress port per interval; two reports per key.
  for (int sw = 0; sw < kSwitches; ++sw) {
    for (int port = 0; port < kPorts; ++port) {
      for (int iv = 0; iv < kIntervals; ++iv) {
        std::array<uint8_t, 8> key{0, 0, 0, static_cast<uint8_t>(sw + 1), 0,
                                   static_cast<uint8_t>(port), 0, static_cast<uint8_t>(iv)};
        for (int rep = 0; rep < 2; ++rep) {
          uint64_t bytes = 1500 * (1 + rng() % 50);
          port_bytes[key] += bytes;
          Simulator::Schedule(MicroSeconds(100 + 200 * iv + 7 * rep + port), [&, sw, key, bytes]() {
            src[sw]->Entry(
                App::LoadImbalance,
                [&](const dta_header *h, uint8_t *b, size_t cap, size_t *len) {
                  return dta_encode_key_increment(h, key.data(), key.size(), bytes, 2, b, cap,
                                                  len);
                },
                key.data(), key.size(), bytes);
          });
        }
      }
    }
  }
  // Drop notices: switch sw appends to list sw+1.
  for (int sw = 0; sw < kSwitches; ++sw) {
    for (int i = 0; i < kDropsPerSwitch; ++i) {
      std::array<uint8_t, 16> e{};
      uint32_t flow = static_cast<uint32_t>(rng() % kFlows);
      uint64_t t_ns = 200000 + 30000 * i + sw;
      // flow id (u32) | sequence (u32) | time in ns (u64), big-endian
      for (int b = 0; b < 4; ++b) e[b] = static_cast<uint8_t>(flow >> (24 - 8 * b));
      for (int b = 0; b < 4; ++b) e[4 + b] = static_cast<uint8_t>(i >> (24 - 8 * b));
      for (int b = 0; b < 8; ++b) e[8 + b] = static_cast<uint8_t>(t_ns >> (56 - 8 * b));
      drops[sw].push_back(e);
      Simulator::Schedule(NanoSeconds(t_ns), [&, sw, e]() {
        uint32_t list = static_cast<uint32_t>(sw + 1);
        uint8_t list_key[4] = {0, 0, 0, static_cast<uint8_t>(list)};
        src[sw]->Entry(
            App::DropNotice,
            [&](const dta_header *h, uint8_t *b, size_t cap, size_t *len) {
              return dta_encode_append(h, list, e.data(), e.size(), b, cap, len);
            },
            list_key, sizeof list_key, 0);
      });
    }
  }
  // Per-flow Count-Min, synced the ApproSync way ([InvisiFlow §6.1]): reporters 0 and 1
  // (switches s0, s1) count packets of every flow; at 0.6 ms, having counted half of them, they
  // sync every non-zero column, last column first; at 0.8 ms they sync every column again with
  // its final (cumulative) counters, first column first. The stores merge what grew per reporter,
  // so the estimates are those of the final sketches.
  std::vector<std::vector<std::vector<uint32_t>>> cm(
      kSketchReporters * 2, std::vector<std::vector<uint32_t>>(
                                kSketchColumns, std::vector<uint32_t>(kSketchRows, 0)));
  std::vector<std::vector<std::vector<uint32_t>>> cm_half_way = cm;
  for (int f = 0; f < kFlows; ++f) {
    FlowKey k = MakeFlow(f);
    uint32_t half = 0;
    Check(dta_sketch_cm_column(k.data(), k.size(), kSketchRows, 2, &half), "cm half");
    for (int r = 0; r < kSketchReporters; ++r) {
      uint32_t pkts = 1 + static_cast<uint32_t>(rng() % 100);
      flow_packets[f] += pkts;
      for (uint32_t row = 0; row < kSketchRows; ++row) {
        uint32_t col = 0;
        Check(dta_sketch_cm_column(k.data(), k.size(), row, kSketchColumns, &col), "cm column");
        cm[r * 2 + half][col][row] += pkts;
        cm_half_way[r * 2 + half][col][row] += pkts / 2;
      }
    }
  }
  for (int r = 0; r < kSketchReporters; ++r) {
    for (int pass = 0; pass < 2; ++pass) {
    Simulator::Schedule(MicroSeconds(pass == 0 ? 600 : 800), [&, r, pass]() {
      const auto &sketch = pass == 0 ? cm_half_way : cm;
      for (uint16_t half = 0; half < 2; ++half) {
        for (uint32_t i = 0; i < kSketchColumns; ++i) {
          uint32_t c = pass == 0 ? kSketchColumns - 1 - i : i;
          uint8_t data[4 * kSketchRows];
          bool any = false;
          for (int row = 0; row < kSketchRows; ++row) {
            uint32_t v = sketch[r * 2 + half][c][row];
            any |= v != 0;
            for (int b = 0; b < 4; ++b) data[4 * row + b] = static_cast<uint8_t>(v >> (24 - 8 * b));
          }
          if (!any) continue;
          uint8_t key[4] = {static_cast<uint8_t>(half), 0, static_cast<uint8_t>(c >> 8),
                            static_cast<uint8_t>(c)};
          src[r]->Entry(
              App::FlowSketch,
              [&](const dta_header *h, uint8_t *b, size_t cap, size_t *len) {
                return dta_encode_sketch_column(h, static_cast<uint16_t>(half + 3),
                                                static_cast<uint16_t>(c), 1, data, sizeof data,
                                                b, cap, len);
              },
              key, sizeof key, c);
        }
      }
    });
    }
  }
  // Every source sends what it has left at 1 ms.
  for (int sw = 0; sw < kSwitches; ++sw) {
    Simulator::Schedule(MicroSeconds(1000), [&, sw]() { src[sw]->Send(); });
  }
  Simulator::Stop(MicroSeconds(1500));
  Simulator::Run();

  // Queries through the C ABI, against the ground truth.
  Checks check;
  app->Flush();
  dta_collector *c = app->Collector();
  for (int a = 0; a < static_cast<int>(dta_sim::kApps); ++a) {
    App ap = static_cast<App>(a);
    check(gt.GeneratedCount(ap) > 0 && gt.DeliveredCount(ap) == gt.GeneratedCount(ap),
          std::string("ground truth: every ") + dta_sim::AppName(ap) + " entry delivered (" +
              std::to_string(gt.DeliveredCount(ap)) + "/" +
              std::to_string(gt.GeneratedCount(ap)) + ")");
  }
  check(gt.Duplicates() == 0 && gt.UnknownDeliveries() == 0,
        "ground truth: no duplicate or unknown delivery");
  const auto &st = app->Stats();
  check(st.rejected == 0 && st.framing_errors == 0 && st.too_many == 0,
        "collector node: no reject, no framing error");
  dta_stats s{};
  Check(dta_collector_stats(c, &s), "stats");
  check(s.rejected == 0, "translator: 0 rejected");

  int good = 0;
  for (const auto &[f, expect] : paths) {
    FlowKey k = MakeFlow(f);
    uint32_t path[8];
    size_t hops = 0;
    int rc = dta_query_postcard_path(c, kPaths, k.data(), k.size(), path, 8, &hops);
    if (rc == DTA_E_OK && std::vector<uint32_t>(path, path + hops) == expect) {
      ++good;
    } else {
      std::fprintf(stderr, "flow %d: %s\n", f, rc == DTA_E_OK ? "wrong path" : dta_last_error());
    }
  }
  check(good == kFlows, "postcarding: every flow's path (" + std::to_string(good) + "/" +
                            std::to_string(kFlows) + ")");

  good = 0;
  for (const auto &[key, bytes] : port_bytes) {
    uint64_t count = 0;
    int rc = dta_query_key_increment(c, kPortBytes, key.data(), key.size(), &count);
    if (rc == DTA_E_OK && count == bytes) {
      ++good;
    } else {
      std::fprintf(stderr, "port key %s: %llu, expected %llu (%s)\n", Hex(key.data(), 8).c_str(),
                   static_cast<unsigned long long>(count), static_cast<unsigned long long>(bytes),
                   rc == DTA_E_OK ? "" : dta_last_error());
    }
  }
  check(good == static_cast<int>(port_bytes.size()),
        "key-increment: every port's bytes (" + std::to_string(good) + "/" +
            std::to_string(port_bytes.size()) + ")");

  int exact = 0, never_below = 0;
  for (const auto &[f, pkts] : flow_packets) {
    FlowKey k = MakeFlow(f);
    uint32_t half = 0;
    Check(dta_sketch_cm_column(k.data(), k.size(), kSketchRows, 2, &half), "cm half");
    uint64_t est = 0;
    int rc = dta_query_sketch(c, kSketches[half], k.data(), k.size(), &est);
    if (rc != DTA_E_OK) {
      std::fprintf(stderr, "flow %d sketch: %s\n", f, dta_last_error());
      continue;
    }
    never_below += est >= pkts;
    exact += est == pkts;
  }
  check(never_below == kFlows, "sketch-merge: no estimate below the true count (" +
                                   std::to_string(never_below) + "/" + std::to_string(kFlows) + ")");
  check(exact >= kFlows * 9 / 10, "sketch-merge: >= 90% of estimates exact (" +
                                      std::to_string(exact) + "/" + std::to_string(kFlows) + ")");

  good = 0;
  for (int sw = 0; sw < kSwitches; ++sw) {
    uint8_t buf[16 * 64];
    dta_list_read r{};
    int rc = dta_query_append_read(c, kDrops, static_cast<uint32_t>(sw + 1), DTA_TAIL_OLDEST, buf,
                                   sizeof buf, &r);
    bool ok = rc == DTA_E_OK && r.entries == drops[sw].size() && r.entry_len == 16 && r.missed == 0;
    for (size_t i = 0; ok && i < r.entries; ++i) {
      ok = std::memcmp(buf + 16 * i, drops[sw][i].data(), 16) == 0;
    }
    if (!ok) {
      std::fprintf(stderr, "drops of switch %d: %s\n", sw,
                   rc == DTA_E_OK ? "entries differ" : dta_last_error());
    }
    good += ok;
  }
  check(good == kSwitches, "append: every switch's drop notices, in order (" +
                               std::to_string(good) + "/" + std::to_string(kSwitches) + ")");

  // A query that cannot be answered is an error with a message, not a 0.
  uint64_t none = 0;
  int rc = dta_query_key_increment(c, "no-such-store", nullptr, 0, &none);
  check(rc == DTA_E_UNKNOWN_STORE && std::strlen(dta_last_error()) > 0,
        "unknown store: DTA_E_UNKNOWN_STORE with a message");

  // Hostile payloads at the collector node: each parse stops at the broken frame and is
  // counted; what came before is ingested.
  {
    dta_sim::CollectorAppStats before = app->Stats();
    uint8_t d[DTA_MAX_ENCODED];
    size_t dlen = 0;
    dta_header h{};
    h.reporter_id = 999;
    uint8_t k[8] = {0, 0, 3, 0xe7, 0, 0, 0, 0};
    Check(dta_encode_key_increment(&h, k, sizeof k, 1, 2, d, sizeof d, &dlen), "encode");
    std::vector<uint8_t> p;
    dta_sim::AppendFramed(p, d, dlen);
    p.push_back(0);
    p.push_back(200);  // a frame running past the payload
    p.push_back(1);
    size_t ok1 = app->HandleTelemetryPayload(p.data(), p.size());
    std::vector<uint8_t> z = {0, 0};  // a zero-length frame
    size_t ok2 = app->HandleTelemetryPayload(z.data(), z.size());
    std::vector<uint8_t> many;
    for (size_t i = 0; i < dta_sim::kMaxDatagramsPerPacket + 1; ++i) {
      dta_sim::AppendFramed(many, d, dlen);
    }
    size_t ok3 = app->HandleTelemetryPayload(many.data(), many.size());
    const dta_sim::CollectorAppStats &after = app->Stats();
    check(ok1 == 1 && ok2 == 0 && ok3 == dta_sim::kMaxDatagramsPerPacket &&
              after.framing_errors == before.framing_errors + 2 &&
              after.too_many == before.too_many + 1,
          "collector node: broken framing stops the parse, counted");
    uint64_t n = 0;
    Check(dta_query_key_increment(c, kPortBytes, k, sizeof k, &n), "query");
    check(n == 1 + dta_sim::kMaxDatagramsPerPacket,
          "collector node: the frames before a broken one are ingested");
  }

  if (!csv.empty()) gt.WriteCsv(csv);
  Simulator::Destroy();
  fs::remove_all(regions);
  std::printf("%d checks, %d failures\n", check.passed + check.failed, check.failed);
  return check.failed == 0 ? 0 : 1;
}
