// Size: one ns-3 run: its options, topology, applications and result; the fabric, the switch
// agents and the collector bridge are their own files.
// invisiflow-sim: one run of the InvisiFlow evaluation ([InvisiFlow §6]) on ns-3. A FatTree carries
// DCTCP user flows drawn from a flow-size CDF; switches run four telemetry applications whose
// entries travel to the collector over one of four channels; the collector is the real DTA
// translator and stores (through the C ABI), and the metrics are computed by querying them and
// cross-checked against the simulator's ground truth. One JSON document per run.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "dta_bridge.h"
#include "fabric.h"
#include "if_frames.h"
#include "ns3/applications-module.h"
#include "ns3/point-to-point-module.h"
#include "sim_context.h"
#include "switch_agent.h"

using namespace ns3;
using namespace ifsim;

namespace ifsim {

const char* ChannelName(Channel c) {
  switch (c) {
    case Channel::None:
      return "none";
    case Channel::DefaultUdp:
      return "default_udp";
    case Channel::LowUdp:
      return "low_udp";
    case Channel::Pull:
      return "pull";
    case Channel::InvisiFlow:
      return "invisiflow";
  }
  return "?";
}

bool ParseChannel(const std::string& s, Channel* out) {
  for (Channel c : {Channel::None, Channel::DefaultUdp, Channel::LowUdp, Channel::Pull,
                    Channel::InvisiFlow}) {
    if (s == ChannelName(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

bool ApplyScale(const std::string& name, SimConfig* c) {
  if (name != "small" && name != "paper") return false;
  const SimConfig small;  // the defaults are the small fabric's
  const bool paper = name == "paper";
  const double r = paper ? 10 : 1;  // link rate over the small fabric's
  c->scale = name;
  c->pods = small.pods;
  c->tors_per_pod = paper ? 3 : small.tors_per_pod;
  c->hosts_per_tor = paper ? 12 : small.hosts_per_tor;
  c->aggs_per_pod = paper ? 3 : small.aggs_per_pod;
  c->cores = paper ? 9 : small.cores;
  c->link_bps = paper ? 100'000'000'000ULL : small.link_bps;
  // [InvisiFlow §6.1]: 170 KB of telemetry buffer and K = 65 at 100 Gbps; a period stays the
  // same number of bytes on a link.
  c->telem_buf_bytes = static_cast<uint32_t>(small.telem_buf_bytes * r);
  c->push_buf_bytes = static_cast<uint32_t>(small.push_buf_bytes * r);
  c->ecn_k = paper ? 65 : small.ecn_k;
  c->load_report_us = small.load_report_us / r;
  c->seed_period_us = small.seed_period_us / r;
  c->collector_seed_period_us = small.collector_seed_period_us / r;
  return true;
}

bool Sim::TelemetryOn() const {
  if (cfg.channel == Channel::None) return false;
  double now = Simulator::Now().GetSeconds() * 1e6;
  return now >= TelemStartUs() && now < TelemEndUs();
}

void GroundTruth::RecordColumn(CmsByReporter* to, uint32_t reporter, uint32_t half, uint32_t col,
                               const uint8_t* data) {
  std::vector<uint32_t>& mine = (*to)[reporter];
  if (mine.empty()) mine.assign(kCmsCells, 0);
  for (uint32_t row = 0; row < kCmsRows; row++) {
    uint32_t& cell = mine[CmsCell(half, row, col)];
    cell = std::max(cell, GetU32(data + 4 * row));
  }
}

std::vector<uint64_t> GroundTruth::Merged(const CmsByReporter& by) {
  std::vector<uint64_t> merged(kCmsCells, 0);
  for (auto& [reporter, cells] : by)
    for (uint32_t i = 0; i < kCmsCells; i++) merged[i] += cells[i];
  return merged;
}

void Sim::Deliver(const uint8_t* payload, size_t len) {
  size_t at = 0;
  while (at + 2 <= len) {
    uint16_t n = GetU16(payload + at);
    if (at + 2 + n > len || n < DTA_HDR) break;
    const uint8_t* d = payload + at + 2;
    at += 2 + n;
    uint32_t reporter = GetU32(d + 4), seq = GetU32(d + 8);
    const dta_sim::Entry* e = gt.log.Delivered(dta_sim::EntryId(reporter, seq), Simulator::Now());
    if (e == nullptr || e->deliveries > 1) continue;  // never generated, or a duplicate (counted)
    // Decode the one report for the cross-check of what the stores answer.
    const uint8_t* rep = d + DTA_HDR;
    uint8_t op = rep[0], klen = rep[2];
    const uint8_t* body = rep + 4;
    if (op == 0x04 && klen == kFlowKeyLen) {
      uint64_t flow = FlowKey::Decode(body).Id();
      delivered_hops[flow] |= static_cast<uint8_t>(1u << body[kFlowKeyLen]);
    } else if (op == 0x03 && klen == 8) {
      uint64_t key = PortPeriodKey(GetU32(body), GetU16(body + 4), GetU16(body + 6));
      uint64_t v = (static_cast<uint64_t>(GetU32(body + 8)) << 32) | GetU32(body + 12);
      delivered_port_bytes[key] += v;
    } else if (op == 0x05 && n >= DTA_HDR + 4 + 8 + 4 * kCmsRows) {
      // Sketch-Merge: sketch id u16, column u16, epoch u32, the column's counters.
      uint32_t half = GetU16(body) - kCmsSketchId, col = GetU16(body + 2);
      if (half < kCmsHalves) GroundTruth::RecordColumn(&gt.cms_delivered, reporter, half, col, body + 8);
    } else if (op == 0x02) {
      gt.drops_delivered++;
    }
  }
  if (ingest) ingest(payload, len);
}

}  // namespace ifsim

namespace {

Sim g;

// ---------------------------------------------------------------------------------------------
// User traffic

struct Flow {
  uint32_t src = 0, dst = 0;
  uint64_t size = 0;
  double start_us = 0;
  double fct_us = -1;
  uint64_t sent = 0, received = 0;
  Ptr<Socket> sock;
};
std::vector<Flow> g_flows;
std::unordered_map<uint64_t, uint32_t> g_flow_by_endpoint;  // (src addr, src port) -> flow
std::unordered_map<Socket*, uint32_t> g_flow_by_rx;
constexpr uint16_t kUserPort = 5000;

struct Cdf {
  std::vector<std::pair<double, double>> pts;  // (bytes, cumulative fraction)
  bool Load(const std::string& path) {
    std::ifstream f(path);
    double b, c;
    while (f >> b >> c) pts.emplace_back(b, c / 100.0);
    return pts.size() >= 2 && pts.back().second > 0.999;
  }
  double Sample(double u) const {
    for (size_t i = 1; i < pts.size(); i++) {
      if (u <= pts[i].second) {
        double span = pts[i].second - pts[i - 1].second;
        double t = span > 0 ? (u - pts[i - 1].second) / span : 1.0;
        return pts[i - 1].first + t * (pts[i].first - pts[i - 1].first);
      }
    }
    return pts.back().first;
  }
  double Mean() const {
    double m = 0;
    for (size_t i = 1; i < pts.size(); i++)
      m += (pts[i].second - pts[i - 1].second) * (pts[i].first + pts[i - 1].first) / 2;
    return m;
  }
};

Ipv4Address ServerAddr(uint32_t s) {
  return g.fabric.ports[g.fabric.server_node[s]][0].local;
}

void FillFlow(uint32_t idx, Ptr<Socket> s, uint32_t) {
  Flow& f = g_flows[idx];
  while (f.sent < f.size) {
    uint32_t avail = s->GetTxAvailable();
    if (avail == 0) return;
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>({f.size - f.sent, avail, 65536}));
    int r = s->Send(Create<Packet>(n));
    if (r <= 0) return;
    f.sent += static_cast<uint64_t>(r);
  }
  s->Close();
}

void Connected(uint32_t idx, Ptr<Socket> s) { FillFlow(idx, s, 0); }
void ConnectFailed(uint32_t, Ptr<Socket>) {}

void StartFlow(uint32_t idx) {
  Flow& f = g_flows[idx];
  Ptr<Node> n = NodeList::GetNode(g.fabric.server_node[f.src]);
  Ptr<Socket> s = Socket::CreateSocket(n, TcpSocketFactory::GetTypeId());
  s->Bind();
  Address local;
  s->GetSockName(local);
  uint16_t port = InetSocketAddress::ConvertFrom(local).GetPort();
  g_flow_by_endpoint[(static_cast<uint64_t>(ServerAddr(f.src).Get()) << 16) | port] = idx;
  s->SetConnectCallback(MakeBoundCallback(&Connected, idx), MakeBoundCallback(&ConnectFailed, idx));
  s->SetSendCallback(MakeBoundCallback(&FillFlow, idx));
  s->Connect(InetSocketAddress(ServerAddr(f.dst), kUserPort));
  f.sock = s;
}

void OnRecv(Ptr<Socket> s) {
  auto it = g_flow_by_rx.find(PeekPointer(s));
  Ptr<Packet> p;
  Address from;
  while ((p = s->RecvFrom(from))) {
    if (it == g_flow_by_rx.end()) continue;
    Flow& f = g_flows[it->second];
    f.received += p->GetSize();
    if (f.received >= f.size && f.fct_us < 0)
      f.fct_us = Simulator::Now().GetSeconds() * 1e6 - f.start_us;
  }
}

void OnAccept(Ptr<Socket> s, const Address& from) {
  InetSocketAddress a = InetSocketAddress::ConvertFrom(from);
  auto it = g_flow_by_endpoint.find((static_cast<uint64_t>(a.GetIpv4().Get()) << 16) | a.GetPort());
  if (it != g_flow_by_endpoint.end()) g_flow_by_rx[PeekPointer(s)] = it->second;
  s->SetRecvCallback(MakeCallback(&OnRecv));
}

void OnTelemetryUdp(Ptr<Socket> s) {
  Ptr<Packet> p;
  std::vector<uint8_t> buf;
  while ((p = s->Recv())) {
    buf.resize(p->GetSize());
    p->CopyData(buf.data(), buf.size());
    g.Deliver(buf.data(), buf.size());
  }
}

// ---------------------------------------------------------------------------------------------
// Topology

std::vector<SharedBuffers> g_buffers;
std::vector<Ptr<SwitchAgent>> g_agents;

void Link(NodeContainer& nodes, uint32_t a, uint32_t b, uint64_t bps, uint32_t link_no) {
  PointToPointHelper p2p;
  p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(bps)));
  p2p.SetChannelAttribute("Delay", TimeValue(Us(g.cfg.link_delay_us)));
  p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1p"));
  NetDeviceContainer d = p2p.Install(nodes.Get(a), nodes.Get(b));
  TrafficControlHelper tch;
  tch.SetRootQueueDisc("ifsim::IfQueueDisc");
  QueueDiscContainer q = tch.Install(d);
  Ipv4AddressHelper addr;
  addr.SetBase(Ipv4Address(0x0a000000u + 4u * link_no), "255.255.255.252");
  Ipv4InterfaceContainer ifs = addr.Assign(d);
  for (int side = 0; side < 2; side++) {
    uint32_t me = side == 0 ? a : b, peer = side == 0 ? b : a;
    Port p;
    p.dev = d.Get(side);
    p.qdisc = DynamicCast<IfQueueDisc>(q.Get(side));
    p.peer = peer;
    p.local = ifs.GetAddress(side);
    p.remote = ifs.GetAddress(1 - side);
    p.if_index = nodes.Get(me)->GetObject<Ipv4>()->GetInterfaceForDevice(p.dev);
    p.bps = bps;
    p.route = Create<Ipv4Route>();
    p.route->SetDestination(p.remote);
    p.route->SetGateway(p.remote);
    p.route->SetSource(p.local);
    p.route->SetOutputDevice(p.dev);
    g.fabric.ports[me].push_back(p);
    g.fabric.addr_node[p.local.Get()] = me;
  }
}

void BuildFabric(NodeContainer& nodes) {
  Fabric& f = g.fabric;
  uint32_t servers = f.pods * f.tors_per_pod * f.hosts_per_tor;
  uint32_t tors = f.pods * f.tors_per_pod, aggs = f.pods * f.aggs_per_pod;
  uint32_t total = servers + tors + aggs + f.cores;
  nodes.Create(total);
  InternetStackHelper stack;
  stack.Install(nodes);
  f.role.assign(total, Role::Server);
  f.ports.assign(total, {});
  f.node_server.assign(total, -1);
  uint32_t tor0 = servers, agg0 = servers + tors, core0 = servers + tors + aggs;
  for (uint32_t i = 0; i < tors; i++) f.role[tor0 + i] = Role::Tor;
  for (uint32_t i = 0; i < aggs; i++) f.role[agg0 + i] = Role::Agg;
  for (uint32_t i = 0; i < f.cores; i++) {
    f.role[core0 + i] = Role::Core;
    g.core_nodes.push_back(core0 + i);
  }
  uint32_t link = 0;
  uint64_t bps = g.cfg.link_bps;
  for (uint32_t s = 0; s < servers; s++) {
    f.server_node.push_back(s);
    f.node_server[s] = static_cast<int32_t>(s);
    f.server_tor.push_back(tor0 + s / f.hosts_per_tor);
    Link(nodes, s, tor0 + s / f.hosts_per_tor, bps, link++);
    f.addr_server[f.ports[s][0].local.Get()] = s;
  }
  // ToR t of pod p connects to every aggregation switch of the pod; aggregation switch a of each
  // pod connects to core group a. The asymmetric case halves one ToR-aggregation and one
  // aggregation-core link on the way to the collector (server 0).
  uint32_t cores_per_group = f.cores / f.aggs_per_pod;
  for (uint32_t p = 0; p < f.pods; p++) {
    for (uint32_t t = 0; t < f.tors_per_pod; t++) {
      for (uint32_t a = 0; a < f.aggs_per_pod; a++) {
        bool slow = g.cfg.asymmetric && p == 0 && t == 0 && a == 0;
        Link(nodes, tor0 + p * f.tors_per_pod + t, agg0 + p * f.aggs_per_pod + a,
             slow ? bps / 2 : bps, link++);
      }
    }
    for (uint32_t a = 0; a < f.aggs_per_pod; a++) {
      for (uint32_t c = 0; c < cores_per_group; c++) {
        bool slow = g.cfg.asymmetric && p == 0 && a == 0 && c == 0;
        Link(nodes, agg0 + p * f.aggs_per_pod + a, core0 + a * cores_per_group + c,
             slow ? bps / 2 : bps, link++);
      }
    }
  }
  f.ComputeRoutes();
}

// ---------------------------------------------------------------------------------------------
// Output helpers

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return NAN;
  size_t i = static_cast<size_t>(std::min<double>(v.size() - 1, std::floor(q * (v.size() - 1))));
  return v[i];
}

// One option of the command line: its name, what it sets, and the accepted range (bounds the
// work of a run: a period cannot be so short, nor a run so long, that events never end).
struct Option {
  const char* name;
  enum Kind { Flag, Text, Real, Count } kind;
  void* field;  // bool, std::string, double, or uint32_t / uint64_t (Count, by `wide`)
  double min = 0, max = 0;
  bool wide = false;  // Count into a uint64_t
  const char* help = "";
};

std::vector<Option> Options(SimConfig* c) {
  using K = Option::Kind;
  return {
      {"--load", K::Real, &c->load, 0.01, 1.5, false, "offered load of the user traffic"},
      {"--workload", K::Text, &c->workload_path, 0, 0, false, "flow-size CDF (required)"},
      {"--seed", K::Count, &c->seed, 1, 4294967295.0, true, "random seed (ns-3's is 32 bits)"},
      {"--traffic-ms", K::Real, &c->traffic_ms, 0.01, 1000, false, "user flows arrive in [0, T), ms"},
      {"--drain-ms", K::Real, &c->drain_ms, 0, 1000, false, "then the run goes on this long, ms"},
      {"--check", K::Flag, &c->check, 0, 0, false, "check the stores against the ground truth"},
      {"--imbalance", K::Flag, &c->imbalance, 0, 0, false, "ECMP on the destination only"},
      {"--asymmetric", K::Flag, &c->asymmetric, 0, 0, false, "two links at half capacity"},
      {"--collectors", K::Count, &c->collectors, 1, 2, false, "a second collector, in another pod"},
      {"--dta-config", K::Text, &c->dta_config, 0, 0, false, "the DTA collector's dta.toml"},
      {"--dta-regions", K::Text, &c->dta_regions, 0, 0, false, "its region directory"},
      {"--telem-buf-bytes", K::Count, &c->telem_buf_bytes, 512, 1 << 30, false,
       "telemetry buffer per switch, bytes"},
      {"--seed-period-us", K::Real, &c->seed_period_us, 0.01, 1e6, false, "time between seeds on a pull-enabled port, us"},
      {"--collector-seed-period-us", K::Real, &c->collector_seed_period_us, 0.01, 1e6, false,
       "the same on a collector's port, us"},
      {"--load-report-us", K::Real, &c->load_report_us, 1, 1e6, false,
       "period of the load-imbalance reports, us"},
      {"--ecn-k", K::Count, &c->ecn_k, 1, 1e6, false, "DCTCP marking threshold, packets"},
      {"--theta", K::Real, &c->approsync_theta, 0, 1e6, false, "ApproSync divergence threshold"},
      {"--out", K::Text, &c->out_json, 0, 0, false, "write the results as JSON"},
      {"--telemetry-log", K::Text, &c->telemetry_log, 0, 0, false, "CSV of every entry"},
  };
}

// A number as a person writes it (no exponent below 1e15).
std::string Plain(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.15g", v);
  return b;
}

std::string Default(const Option& o) {
  switch (o.kind) {
    case Option::Flag: return "";
    case Option::Text: {
      const std::string& v = *static_cast<std::string*>(o.field);
      return v.empty() ? "" : " " + v;
    }
    case Option::Real: return " " + Plain(*static_cast<double*>(o.field));
    case Option::Count:
      return " " + std::to_string(o.wide ? *static_cast<uint64_t*>(o.field)
                                         : *static_cast<uint32_t*>(o.field));
  }
  return "";
}

void Usage() {
  SimConfig defaults;
  std::fprintf(stderr,
               "usage: invisiflow-sim --channel none|default_udp|low_udp|pull|invisiflow "
               "(default invisiflow) [options]\n"
               "  --scale small|paper            the FatTree: small (default) is 4 pods x 2 ToRs "
               "x 8 servers, 2 aggregation switches a pod, 4 cores, 10 Gbps; paper is 4 x 3 x 12, "
               "3, 9 cores, 100 Gbps ([InvisiFlow 6.1]), with buffers, K and periods scaled; the "
               "defaults below are the small scale's\n");
  for (const Option& o : Options(&defaults)) {
    std::string range;
    if (o.kind == Option::Real || o.kind == Option::Count)
      range = " [" + Plain(o.min) + ", " + Plain(o.max) + "]";
    std::fprintf(stderr, "  %-28s %s%s%s%s\n", o.name, o.help, range.c_str(),
                 Default(o).empty() ? "" : ", default", Default(o).c_str());
  }
}

// Sets option `o` from `v`: the whole text must be a finite number within the option's range.
bool SetOption(const Option& o, const char* v) {
  if (o.kind == Option::Text) {
    *static_cast<std::string*>(o.field) = v;
    return true;
  }
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v, &end);
  bool whole = end != v && *end == '\0' && errno == 0 && std::isfinite(x);
  if (o.kind == Option::Count) whole = whole && x == std::floor(x);
  if (!whole || x < o.min || x > o.max) {
    std::fprintf(stderr, "error: %s %s: a %s in [%s, %s] is required\n", o.name, v,
                 o.kind == Option::Count ? "whole number" : "number", Plain(o.min).c_str(),
                 Plain(o.max).c_str());
    return false;
  }
  if (o.kind == Option::Real)
    *static_cast<double*>(o.field) = x;
  else if (o.wide)
    *static_cast<uint64_t*>(o.field) = static_cast<uint64_t>(x);
  else
    *static_cast<uint32_t*>(o.field) = static_cast<uint32_t>(x);
  return true;
}

bool ParseArgs(int argc, char** argv, SimConfig* c) {
  // The scale first: it sets the defaults that the other options override.
  for (int i = 1; i < argc; i++) {
    if (std::string(argv[i]) != "--scale") continue;
    if (i + 1 >= argc || !ApplyScale(argv[i + 1], c)) {
      std::fprintf(stderr, "error: --scale needs small or paper\n");
      return false;
    }
  }
  std::vector<Option> options = Options(c);
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--scale") {
      i++;
      continue;
    }
    if (a == "--channel") {
      if (i + 1 >= argc || !ParseChannel(argv[i + 1], &c->channel)) {
        std::fprintf(stderr, "error: --channel needs one of none, default_udp, low_udp, pull, "
                             "invisiflow\n");
        return false;
      }
      i++;
      continue;
    }
    auto o = std::find_if(options.begin(), options.end(),
                          [&](const Option& x) { return a == x.name; });
    if (o == options.end()) {
      std::fprintf(stderr, "error: unknown argument %s\n", a.c_str());
      return false;
    }
    if (o->kind == Option::Flag) {
      *static_cast<bool*>(o->field) = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: %s needs a value\n", o->name);
      return false;
    }
    if (!SetOption(*o, argv[++i])) return false;
  }
  if (c->check && c->dta_config.empty()) {
    std::fprintf(stderr, "error: --check needs --dta-config\n");
    return false;
  }
  if (c->workload_path.empty()) {
    std::fprintf(stderr, "error: --workload FILE (a flow-size CDF) is required\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      Usage();
      return 0;
    }
  }
  if (!ParseArgs(argc, argv, &g.cfg)) {
    Usage();
    return 2;
  }
  SimConfig& cfg = g.cfg;
  Cdf cdf;
  if (!cdf.Load(cfg.workload_path)) {
    std::fprintf(stderr, "error: cannot read a flow-size CDF from %s\n", cfg.workload_path.c_str());
    return 2;
  }
  DtaBridge dta;
  if (!cfg.dta_config.empty()) {
    std::string err;
    if (!dta.Open(cfg.dta_config, cfg.dta_regions, &err)) {
      std::fprintf(stderr, "error: DTA collector: %s\n", err.c_str());
      return 1;
    }
    g.ingest = [&dta](const uint8_t* p, size_t n) { dta.Ingest(p, n); };
  }

  // DCTCP ([InvisiFlow §6.1]) with data-center timers.
  Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpDctcp::GetTypeId()));
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
  Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 20));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 20));
  Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(MilliSeconds(1)));
  Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(1)));
  Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MicroSeconds(10)));
  RngSeedManager::SetSeed(static_cast<uint32_t>(cfg.seed));

  g_low_priority_postcards = cfg.channel == ifsim::Channel::LowUdp;
  NodeContainer nodes;
  g.fabric.pods = cfg.pods, g.fabric.tors_per_pod = cfg.tors_per_pod;
  g.fabric.hosts_per_tor = cfg.hosts_per_tor, g.fabric.aggs_per_pod = cfg.aggs_per_pod;
  g.fabric.cores = cfg.cores;
  BuildFabric(nodes);
  Fabric& f = g.fabric;
  g.collector_nodes.push_back(f.server_node[0]);
  if (cfg.collectors == 2) g.collector_nodes.push_back(f.server_node[f.NumServers() - 1]);
  f.ComputeCollectorDistances(g.collector_nodes);
  g.collector_addr = ServerAddr(0);

  g.gt.core_load.assign(f.cores, {});
  g.agents.assign(f.NumNodes(), nullptr);
  g_buffers.assign(f.NumNodes(), {});
  bool pulling = cfg.channel == ifsim::Channel::Pull || cfg.channel == ifsim::Channel::InvisiFlow;
  for (uint32_t n = 0; n < f.NumNodes(); n++) {
    SharedBuffers& b = g_buffers[n];
    uint64_t gbps = 0;
    for (const Port& p : f.ports[n]) gbps += p.bps / 1'000'000'000ULL;
    if (f.role[n] == Role::Server) {
      b.user_cap = 64ull << 20;  // a host's queue is not the network's buffer
      b.telem_cap = 1ull << 20;
    } else {
      b.user_cap = static_cast<uint64_t>(cfg.user_buf_bytes_per_gbps * gbps);
      b.telem_cap = pulling ? cfg.push_buf_bytes : cfg.telem_buf_bytes;
    }
    bool collector =
        std::find(g.collector_nodes.begin(), g.collector_nodes.end(), n) != g.collector_nodes.end();
    Ptr<Ipv4L3Protocol> ipv4 = nodes.Get(n)->GetObject<Ipv4L3Protocol>();
    Ptr<FabricRouting> routing =
        CreateObject<FabricRouting>(&g.fabric, n, cfg.imbalance, Mix64(cfg.seed * 31 + n));
    ipv4->SetRoutingProtocol(routing);
    Ptr<SwitchAgent> agent;
    if (f.role[n] != Role::Server || collector) {
      agent = CreateObject<SwitchAgent>(&g, n, collector);
      ipv4->Insert(agent);
      g_agents.push_back(agent);
      g.agents[n] = PeekPointer(agent);
      if (f.role[n] != Role::Server) routing->agent = PeekPointer(agent);
    }
    for (uint32_t i = 0; i < f.ports[n].size(); i++) {
      Ptr<IfQueueDisc> q = f.ports[n][i].qdisc;
      q->buffers = &g_buffers[n];
      q->ecn_k = cfg.ecn_k;
      if (agent) {
        SwitchAgent* ag = PeekPointer(agent);
        q->late_bind = [ag, i](Ptr<QueueDiscItem> item, Band band) {
          return ag->LateBind(i, item, band);
        };
        q->on_user_drop = [ag](Ptr<const QueueDiscItem> item) { ag->OnUserDrop(item); };
      }
    }
  }
  for (auto& a : g_agents) a->Start();

  // Collector sockets for the postcard-mode channels.
  for (uint32_t c : g.collector_nodes) {
    Ptr<Socket> s = Socket::CreateSocket(nodes.Get(c), UdpSocketFactory::GetTypeId());
    s->Bind(InetSocketAddress(Ipv4Address::GetAny(), kTelemetryPort));
    s->SetRecvCallback(MakeCallback(&OnTelemetryUdp));
  }
  // Receivers of user flows.
  for (uint32_t s = 0; s < f.NumServers(); s++) {
    Ptr<Socket> l = Socket::CreateSocket(nodes.Get(f.server_node[s]), TcpSocketFactory::GetTypeId());
    l->Bind(InetSocketAddress(Ipv4Address::GetAny(), kUserPort));
    l->Listen();
    l->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                         MakeCallback(&OnAccept));
  }
  // Poisson flow arrivals: the load is the fraction of the ToR uplink capacity the offered
  // traffic would use (every server sends at load x uplinks / hosts per ToR).
  {
    std::mt19937_64 rng(Mix64(cfg.seed));
    double per_server_bps =
        cfg.load * static_cast<double>(cfg.link_bps) * f.aggs_per_pod / f.hosts_per_tor;
    double rate_per_us = per_server_bps / 8.0 / cdf.Mean() / 1e6;
    std::exponential_distribution<double> gap(rate_per_us);
    std::uniform_real_distribution<double> uni(0, 1);
    for (uint32_t s = 0; s < f.NumServers(); s++) {
      double t = gap(rng);
      while (t < cfg.traffic_ms * 1000.0) {
        Flow fl;
        fl.src = s;
        fl.dst = static_cast<uint32_t>(rng() % (f.NumServers() - 1));
        if (fl.dst >= s) fl.dst++;
        fl.size = std::max<uint64_t>(1, static_cast<uint64_t>(cdf.Sample(uni(rng))));
        fl.start_us = t;
        g_flows.push_back(fl);
        t += gap(rng);
      }
    }
    for (uint32_t i = 0; i < g_flows.size(); i++)
      Simulator::Schedule(Us(g_flows[i].start_us), &StartFlow, i);
  }

  double end_us = cfg.traffic_ms * 1000.0 + cfg.drain_ms * 1000.0;
  Simulator::Stop(Us(end_us));
  Simulator::Run();

  // ---- metrics -------------------------------------------------------------------------------
  GroundTruth& gt = g.gt;
  std::ostringstream js;
  js << "{\n";
  js << "  \"channel\": \"" << ChannelName(cfg.channel) << "\",\n";
  js << "  \"load\": " << Num(cfg.load) << ",\n";
  js << "  \"workload\": \"" << cfg.workload_path.substr(cfg.workload_path.find_last_of('/') + 1)
     << "\",\n";
  js << "  \"seed\": " << cfg.seed << ",\n";
  js << "  \"scale\": \"" << cfg.scale << "\", \"servers\": " << g.fabric.NumServers()
     << ", \"switches\": " << g.fabric.NumNodes() - g.fabric.NumServers()
     << ", \"link_gbps\": " << cfg.link_bps / 1'000'000'000ULL << ",\n";
  js << "  \"scenario\": \""
     << (cfg.asymmetric ? "asymmetric" : (cfg.imbalance ? "imbalance" : "default")) << "\",\n";
  js << "  \"collectors\": " << cfg.collectors << ",\n";
  js << "  \"traffic_ms\": " << Num(cfg.traffic_ms) << ", \"drain_ms\": " << Num(cfg.drain_ms)
     << ",\n";
  js << "  \"telem_buf_bytes\": " << cfg.telem_buf_bytes << ", \"seed_period_us\": "
     << Num(cfg.seed_period_us) << ", \"collector_seed_period_us\": "
     << Num(cfg.collector_seed_period_us) << ", \"load_report_us\": " << Num(cfg.load_report_us)
     << ", \"approsync_theta\": " << Num(cfg.approsync_theta) << ", \"ecn_k\": " << cfg.ecn_k
     << ",\n";

  // Telemetry entries: loss and delay.
  uint64_t gen[kApps] = {0}, del[kApps] = {0};
  std::vector<double> delays;
  uint64_t total = 0;
  for (const dta_sim::Entry& e : gt.log.Entries()) {
    total++;
    gen[static_cast<int>(e.app)]++;
    if (e.delivered_ns >= 0) {
      del[static_cast<int>(e.app)]++;
      delays.push_back((e.delivered_ns - e.generated_ns) / 1e3);
    }
  }
  std::sort(delays.begin(), delays.end());
  uint64_t delivered = delays.size();
  js << "  \"entries_generated\": " << total << ", \"entries_delivered\": " << delivered
     << ", \"duplicates\": " << gt.log.Duplicates() << ", \"lost_source_full\": " << gt.lost_source_full
     << ", \"lost_in_transit_full\": " << gt.lost_in_transit_full << ",\n";
  js << "  \"telemetry_loss_rate\": "
     << Num(total ? 1.0 - static_cast<double>(delivered) / total : NAN) << ",\n";
  js << "  \"per_app\": {";
  for (uint32_t a = 0; a < kApps; a++) {
    js << (a ? ", " : "") << "\"" << AppName(static_cast<App>(a)) << "\": {\"generated\": " << gen[a]
       << ", \"delivered\": " << del[a] << "}";
  }
  js << "},\n";
  // Delay CDF: quantiles over all generated entries, a lost entry's delay being infinite.
  js << "  \"delay_us_quantiles\": [";
  for (int i = 0; i <= 100; i++) {
    double q = i / 100.0;
    double pos = q * (total ? total - 1 : 0);
    double v = (total && pos < delivered) ? delays[static_cast<size_t>(pos)] : INFINITY;
    js << (i ? ", " : "") << Num(v);
  }
  js << "],\n";
  js << "  \"delay_us_p50\": " << Num(Quantile(delays, 0.5)) << ", \"delay_us_p99\": "
     << Num(total && 0.99 * (total - 1) < delivered ? delays[static_cast<size_t>(0.99 * (total - 1))]
                                                   : INFINITY)
     << ",\n";

  // Path tracing: paths whose every hop was generated; missing when the Postcarding store does
  // not hold exactly the switches of the path.
  uint64_t paths = 0, missing_dta = 0, missing_gt = 0, dta_errors = 0;
  // --check: the stores against the ground truth of what reached the collector.
  uint64_t checks = 0, failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    checks++;
    if (!ok) {
      failures++;
      std::fprintf(stderr, "check failed: %s\n", what.c_str());
    }
  };
  uint64_t dta_only_missing = 0;
  std::string first_error;
  for (auto& [flow, pr] : gt.paths) {
    uint8_t full = static_cast<uint8_t>((1u << pr.len) - 1);
    if (pr.seen != full) continue;
    paths++;
    auto it = g.delivered_hops.find(flow);
    if (it == g.delivered_hops.end() || it->second != full) missing_gt++;
    if (dta.IsOpen()) {
      std::vector<uint32_t> hops;
      std::string err;
      bool ok = dta.PostcardPath(pr.key, pr.len, &hops, &err);
      bool match = ok && hops.size() == pr.len;
      for (uint32_t h = 0; match && h < pr.len; h++) match = hops[h] == pr.sw[h];
      if (!match) missing_dta++;
      bool delivered_full = it != g.delivered_hops.end() && it->second == full;
      if (!match && delivered_full) dta_only_missing++;
      if (match && !delivered_full) check(false, "a path the collector never received is stored");
      if (!ok && !err.empty()) {
        dta_errors++;
        if (first_error.empty()) first_error = err;
      }
    }
  }
  js << "  \"paths\": " << paths << ",\n";
  js << "  \"missing_paths_ratio_groundtruth\": " << Num(paths ? double(missing_gt) / paths : NAN)
     << ",\n";
  js << "  \"missing_paths_ratio\": "
     << Num(dta.IsOpen() && paths ? double(missing_dta) / paths : NAN) << ",\n";

  // Load imbalance at the core switches: an event is a period whose max/min core load exceeds 2;
  // the collector misses it when its view (queried from Key-Increment) does not exceed 2.
  uint64_t events = 0, missed_dta = 0, missed_gt = 0;
  {
    std::map<uint32_t, std::vector<uint64_t>> per_period;
    for (uint32_t c = 0; c < f.cores; c++)
      for (auto& [period, bytes] : gt.core_load[c]) {
        auto& v = per_period[period];
        v.resize(f.cores, 0);
        v[c] = bytes;
      }
    auto imbalanced = [](const std::vector<uint64_t>& v) {
      uint64_t mx = *std::max_element(v.begin(), v.end());
      uint64_t mn = *std::min_element(v.begin(), v.end());
      return mx > 0 && (mn == 0 || static_cast<double>(mx) / mn > 2.0);
    };
    for (auto& [period, loads] : per_period) {
      if (!imbalanced(loads)) continue;
      events++;
      std::vector<uint64_t> seen_gt(f.cores, 0), seen_dta(f.cores, 0);
      for (uint32_t c = 0; c < f.cores; c++) {
        uint32_t node = g.core_nodes[c];
        uint32_t sw = node - f.NumServers();
        for (uint32_t port = 0; port < f.ports[node].size(); port++) {
          uint64_t key = PortPeriodKey(sw, port, period);
          auto it = g.delivered_port_bytes.find(key);
          if (it != g.delivered_port_bytes.end()) seen_gt[c] += it->second;
          if (dta.IsOpen() && gt.port_bytes.count(key)) {
            uint8_t k[8];
            EncodePortPeriodKey(k, sw, port, period);
            uint64_t v = 0;
            std::string err;
            if (dta.PortBytes(k, 8, &v, &err)) {
              seen_dta[c] += v;
              if (cfg.check) {
                auto d = g.delivered_port_bytes.find(key);
                uint64_t got = d == g.delivered_port_bytes.end() ? 0 : d->second;
                // Key-Increment answers a count-min: never below what was delivered.
                if (v < got) check(false, "portbytes below the delivered bytes");
              }
            } else {
              dta_errors++;
              if (first_error.empty()) first_error = err;
            }
          }
        }
      }
      if (!imbalanced(seen_gt)) missed_gt++;
      if (dta.IsOpen() && !imbalanced(seen_dta)) missed_dta++;
    }
  }
  js << "  \"imbalance_events\": " << events << ",\n";
  js << "  \"missing_imbalance_ratio_groundtruth\": "
     << Num(events ? double(missed_gt) / events : NAN) << ",\n";
  js << "  \"missing_imbalance_ratio\": "
     << Num(dta.IsOpen() && events ? double(missed_dta) / events : NAN) << ",\n";

  // Per-flow accounting: average relative error of the Count-Min estimate of each flow's packets
  // through the cores, as the ApproSync Sketch-Merge stores answer it, normalised to the
  // estimate of the loss-free sketch (every sync delivered: this removes the error of ApproSync
  // and of Count-Min itself).
  {
    std::vector<uint64_t> generated = GroundTruth::Merged(gt.cms_generated);
    std::vector<uint64_t> delivered = GroundTruth::Merged(gt.cms_delivered);
    double re_full = 0, re_gt = 0, re_dta = 0;
    uint64_t n = 0;
    for (auto& [flow, fc] : gt.flow_packets) {
      CmsCells cells = CmsCellsOf(fc.key);
      uint64_t est_full = UINT64_MAX, est_gt = UINT64_MAX, est_dta = 0;
      for (uint32_t r = 0; r < kCmsRows; r++) {
        uint32_t i = CmsCell(cells.half, r, cells.col[r]);
        est_full = std::min<uint64_t>(est_full, generated[i]);
        est_gt = std::min<uint64_t>(est_gt, delivered[i]);
      }
      if (dta.IsOpen()) {
        std::string err;
        if (!dta.SketchEstimate(cells.half, fc.key, &est_dta, &err)) {
          dta_errors++;
          if (first_error.empty()) first_error = err;
        }
        if (cfg.check && est_dta != est_gt)
          check(false, "sketch estimate differs from the delivered columns");
      }
      double t = static_cast<double>(fc.packets);
      re_full += std::fabs(static_cast<double>(est_full) - t) / t;
      re_gt += std::fabs(static_cast<double>(est_gt) - t) / t;
      if (dta.IsOpen()) re_dta += std::fabs(static_cast<double>(est_dta) - t) / t;
      n++;
    }
    js << "  \"cms_flows\": " << n << ",\n";
    js << "  \"cms_relative_error_lossless\": " << Num(n ? re_full / n : NAN) << ",\n";
    js << "  \"cms_normalized_error_groundtruth\": "
       << Num(n && re_full > 0 ? re_gt / re_full : NAN) << ",\n";
    js << "  \"cms_normalized_error\": "
       << Num(dta.IsOpen() && n && re_full > 0 ? re_dta / re_full : NAN) << ",\n";
  }
  // Drop notifications: Append entries stored vs generated.
  js << "  \"drops_generated\": " << gt.drops_generated << ", \"drops_delivered_groundtruth\": "
     << gt.drops_delivered;
  if (dta.IsOpen()) {
    std::string err;
    int64_t n = dta.AppendCount(f.NumNodes() - f.NumServers(), &err);
    js << ", \"drops_stored\": " << (n >= 0 ? std::to_string(n) : std::string("null"));
    if (n < 0 && first_error.empty()) first_error = err;
  }
  js << ",\n";

  // FCT of user flows started while telemetry runs, by destination: the collector's rack, the
  // collector servers themselves, everything. Per-flow values let the sweep normalise to the run
  // without telemetry.
  {
    double t0 = g.TelemStartUs(), t1 = g.TelemEndUs();
    uint32_t rack = f.Rack(0);  // the collector is server 0 (a second one, the last server)
    auto is_collector = [&](uint32_t server) {
      return std::find(g.collector_nodes.begin(), g.collector_nodes.end(),
                       f.server_node[server]) != g.collector_nodes.end();
    };
    double sum_rack = 0, sum_all = 0;
    uint64_t n_rack = 0, n_all = 0, n_collector = 0, incomplete = 0;
    std::ostringstream rack_list, collector_list;
    for (uint32_t i = 0; i < g_flows.size(); i++) {
      const Flow& fl = g_flows[i];
      if (fl.start_us < t0 || fl.start_us >= t1) continue;
      if (fl.fct_us < 0) {
        incomplete++;
        continue;
      }
      sum_all += fl.fct_us;
      n_all++;
      if (f.Rack(fl.dst) == rack) {
        sum_rack += fl.fct_us;
        rack_list << (n_rack ? ", " : "") << "[" << i << ", " << Num(fl.fct_us) << "]";
        n_rack++;
      }
      if (is_collector(fl.dst)) {
        collector_list << (n_collector ? ", " : "") << "[" << i << ", " << Num(fl.fct_us) << "]";
        n_collector++;
      }
    }
    js << "  \"flows\": " << g_flows.size() << ", \"flows_in_window\": " << n_all + incomplete
       << ", \"flows_incomplete\": " << incomplete << ",\n";
    js << "  \"fct_mean_us_all\": " << Num(n_all ? sum_all / n_all : NAN) << ",\n";
    js << "  \"fct_mean_us_rack\": " << Num(n_rack ? sum_rack / n_rack : NAN) << ",\n";
    js << "  \"fct_rack\": [" << rack_list.str() << "],\n";
    js << "  \"fct_collector\": [" << collector_list.str() << "],\n";
  }
  uint64_t user_drops = 0, marks = 0, telem_drops = 0;
  for (auto& b : g_buffers) {
    user_drops += b.user_drops;
    marks += b.ecn_marks;
    telem_drops += b.telem_drops;
  }
  // Where telemetry frames were dropped: per switch tier, and whether in the collector's pod.
  {
    uint64_t by[3][2] = {};  // [ToR, aggregation, core][other pods, the collector's pod]
    for (uint32_t n = 0; n < f.NumNodes(); n++) {
      Role r = f.role[n];
      if (r == Role::Server) continue;
      int tier = r == Role::Tor ? 0 : r == Role::Agg ? 1 : 2;
      bool home = tier < 2 && f.dist_collector[n] <= (tier == 0 ? 1u : 2u);
      by[tier][home ? 1 : 0] += g_buffers[n].telem_drops;
    }
    js << "  \"telemetry_queue_drops_by_tier\": {\"tor\": [" << by[0][0] << ", " << by[0][1]
       << "], \"agg\": [" << by[1][0] << ", " << by[1][1] << "], \"core\": " << by[2][0]
       << "},\n";
  }
  uint32_t peak = 0;
  for (auto& a : g_agents) peak = std::max(peak, a->peak_bytes);
  js << "  \"user_drops\": " << user_drops << ", \"ecn_marks\": " << marks
     << ", \"telemetry_queue_drops\": " << telem_drops << ", \"peak_switch_buffer_bytes\": " << peak
     << ",\n";
  js << "  \"dta\": " << (dta.IsOpen() ? dta.StatsJson() : std::string("null"))
     << ", \"dta_query_errors\": " << dta_errors << ", \"dta_first_error\": \"" << first_error
     << "\"\n";
  js << "}\n";
  if (cfg.check) {
    dta_stats st{};
    bool have = dta.Stats(&st);
    check(have, "the DTA collector is open and answers its statistics");
    if (have) {
      check(st.rejected == 0, "the translator rejected " + std::to_string(st.rejected) + " reports");
      check(st.datagrams == delivered,
            "datagrams ingested " + std::to_string(st.datagrams) + " != entries delivered " +
                std::to_string(delivered));
    }
    check(delivered > 0, "telemetry reached the collector");
    check(paths > 0, "flows were traced");
    // Postcarding answers every path whose hops all arrived (a few may be lost to the store's
    // own collisions: at most 1 %).
    check(dta_only_missing * 100 <= paths,
          std::to_string(dta_only_missing) + " delivered paths not answered by the store");
    check(dta_errors == 0, "queries failed: " + first_error);
    std::string err;
    int64_t stored = dta.AppendCount(f.NumNodes() - f.NumServers(), &err);
    check(stored == static_cast<int64_t>(gt.drops_delivered),
          "drops stored " + std::to_string(stored) + " != delivered " +
              std::to_string(gt.drops_delivered));
    std::printf("%" PRIu64 " checks, %" PRIu64 " failures\n", checks, failures);
  }
  Simulator::Destroy();
  if (!cfg.telemetry_log.empty()) {
    try {
      gt.log.WriteCsv(cfg.telemetry_log);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (cfg.check && failures > 0) return 1;
  if (cfg.out_json.empty()) {
    if (!cfg.check) std::cout << js.str();
  } else {
    std::ofstream o(cfg.out_json);
    o << js.str();
    if (!o) {
      std::fprintf(stderr, "error: cannot write %s\n", cfg.out_json.c_str());
      return 1;
    }
  }
  return 0;
}
