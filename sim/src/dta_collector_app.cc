#include "dta_collector_app.h"

#include <stdexcept>

#include "ns3/inet-socket-address.h"
#include "ns3/log.h"
#include "ns3/packet.h"
#include "ns3/uinteger.h"
#include "ns3/udp-socket-factory.h"

NS_LOG_COMPONENT_DEFINE("DtaCollectorApp");

namespace dta_sim {

bool AppendFramed(std::vector<uint8_t> &payload, const uint8_t *datagram, std::size_t len) {
  if (len == 0 || len > 0xffff) return false;
  payload.push_back(static_cast<uint8_t>(len >> 8));
  payload.push_back(static_cast<uint8_t>(len & 0xff));
  payload.insert(payload.end(), datagram, datagram + len);
  return true;
}

NS_OBJECT_ENSURE_REGISTERED(DtaCollectorApp);

ns3::TypeId DtaCollectorApp::GetTypeId() {
  static ns3::TypeId tid =
      ns3::TypeId("dta_sim::DtaCollectorApp")
          .SetParent<ns3::Application>()
          .AddConstructor<DtaCollectorApp>()
          .AddAttribute("Port", "UDP port telemetry packets arrive on", ns3::UintegerValue(40040),
                        ns3::MakeUintegerAccessor(&DtaCollectorApp::m_port),
                        ns3::MakeUintegerChecker<uint16_t>());
  return tid;
}

DtaCollectorApp::DtaCollectorApp() : m_rx(65536) {}

DtaCollectorApp::~DtaCollectorApp() {
  if (m_collector != nullptr) {
    dta_collector_close(m_collector);
    m_collector = nullptr;
  }
}

void DtaCollectorApp::Open(const std::string &config_toml, const std::string &region_dir) {
  if (m_collector != nullptr) throw std::runtime_error("DtaCollectorApp::Open: already open");
  int rc = dta_collector_open_dir(config_toml.c_str(),
                                  region_dir.empty() ? nullptr : region_dir.c_str(),
                                  &m_collector);
  if (rc != DTA_E_OK) {
    throw std::runtime_error(std::string("dta_collector_open_dir: ") + dta_last_error());
  }
}

void DtaCollectorApp::Flush() {
  if (m_collector == nullptr) throw std::runtime_error("DtaCollectorApp::Flush: not open");
  if (dta_collector_flush(m_collector) != DTA_E_OK) {
    throw std::runtime_error(std::string("dta_collector_flush: ") + dta_last_error());
  }
}

std::size_t DtaCollectorApp::HandleTelemetryPayload(const uint8_t *payload, std::size_t len,
                                                    ns3::Ipv4Address from) {
  ++m_stats.packets;
  std::size_t ok = 0, n = 0, at = 0;
  while (at < len) {
    if (len - at < kFramePrefixLen) {
      ++m_stats.framing_errors;
      break;
    }
    std::size_t dlen = (static_cast<std::size_t>(payload[at]) << 8) | payload[at + 1];
    at += kFramePrefixLen;
    if (dlen == 0 || dlen > len - at) {
      ++m_stats.framing_errors;
      break;
    }
    if (++n > kMaxDatagramsPerPacket) {
      // Bounded work per packet: the rest of an oversized packet is not ingested.
      ++m_stats.too_many;
      break;
    }
    const uint8_t *d = payload + at;
    at += dlen;
    ++m_stats.datagrams;
    int rc = dta_collector_ingest_from(m_collector, d, dlen, from.Get(), m_port);
    if (rc == DTA_E_OK) {
      ++m_stats.ingested;
      ++ok;
    } else {
      ++m_stats.rejected;
      NS_LOG_WARN("datagram rejected: " << dta_last_error());
    }
    if (m_delivered) {
      dta_header h{};
      if (dta_datagram_header(d, dlen, &h) == DTA_E_OK) m_delivered(h, d, dlen);
    }
  }
  return ok;
}

void DtaCollectorApp::StartApplication() {
  if (m_collector == nullptr) {
    NS_FATAL_ERROR("DtaCollectorApp started before Open()");
  }
  m_socket = ns3::Socket::CreateSocket(GetNode(), ns3::UdpSocketFactory::GetTypeId());
  if (m_socket->Bind(ns3::InetSocketAddress(ns3::Ipv4Address::GetAny(), m_port)) != 0) {
    NS_FATAL_ERROR("DtaCollectorApp: cannot bind UDP port " << m_port);
  }
  m_socket->SetRecvCallback(ns3::MakeCallback(&DtaCollectorApp::HandleRead, this));
}

void DtaCollectorApp::StopApplication() {
  if (m_socket) {
    m_socket->Close();
    m_socket->SetRecvCallback(ns3::MakeNullCallback<void, ns3::Ptr<ns3::Socket>>());
    m_socket = nullptr;
  }
}

void DtaCollectorApp::HandleRead(ns3::Ptr<ns3::Socket> socket) {
  ns3::Address from;
  while (ns3::Ptr<ns3::Packet> p = socket->RecvFrom(from)) {
    std::size_t n = p->GetSize();
    if (n > m_rx.size()) m_rx.resize(n);
    p->CopyData(m_rx.data(), n);
    ns3::Ipv4Address src("127.0.0.1");
    if (ns3::InetSocketAddress::IsMatchingType(from)) {
      src = ns3::InetSocketAddress::ConvertFrom(from).GetIpv4();
    }
    HandleTelemetryPayload(m_rx.data(), n, src);
  }
}

void DtaCollectorApp::DoDispose() {
  StopApplication();
  if (m_collector != nullptr) {
    dta_collector_close(m_collector);
    m_collector = nullptr;
  }
  ns3::Application::DoDispose();
}

}  // namespace dta_sim
