// The collector node of the simulation: an ns-3 Application that receives the telemetry
// packets arriving there and feeds every DTA report they carry into a real DTA collector
// (translator and stores, in-process through the C ABI of dta/dta.h).
//
// Telemetry packet payload framing (what senders put in a UDP payload, and what
// HandleTelemetryPayload takes): a sequence of length-prefixed DTA datagrams,
//
//     [len: u16 big-endian][len bytes: one DTA datagram] [len][datagram] ...
//
// each datagram exactly what a DTA reporter would send over UDP (dta_encode_* writes one).
// A telemetry packet carries up to kMaxDatagramsPerPacket of them ([InvisiFlow §6.1]: 8 entries
// per telemetry packet). A length of 0, or one running past the payload's end, ends the parse
// of that payload and is counted as a framing error; the datagrams before it are ingested.
#ifndef DTA_SIM_DTA_COLLECTOR_APP_H
#define DTA_SIM_DTA_COLLECTOR_APP_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ns3/application.h"
#include "ns3/ipv4-address.h"
#include "ns3/ptr.h"
#include "ns3/socket.h"

#include "dta/dta.h"

namespace dta_sim {

// Entries (DTA datagrams) per telemetry packet, at most.
constexpr std::size_t kMaxDatagramsPerPacket = 8;
// Bytes of the length prefix in front of each datagram.
constexpr std::size_t kFramePrefixLen = 2;

// Append one framed datagram to a telemetry payload (the sender's side of the framing).
// False, leaving `payload` unchanged, if `len` is 0 or does not fit the u16 prefix.
bool AppendFramed(std::vector<uint8_t> &payload, const uint8_t *datagram, std::size_t len);

// Counters of the collector node.
struct CollectorAppStats {
  uint64_t packets = 0;          // telemetry packets received
  uint64_t datagrams = 0;        // DTA datagrams found in them
  uint64_t ingested = 0;         // ... applied by the translator without a reject
  uint64_t rejected = 0;         // ... rejected in whole or part (dta_collector_stats says why)
  uint64_t framing_errors = 0;   // payloads whose framing broke off (see the header comment)
  uint64_t too_many = 0;         // payloads with more than kMaxDatagramsPerPacket datagrams
};

class DtaCollectorApp : public ns3::Application {
 public:
  static ns3::TypeId GetTypeId();
  DtaCollectorApp();
  ~DtaCollectorApp() override;

  // Open the DTA collector of `config_toml` with its regions in `region_dir` (a fresh
  // directory per run; empty: the configuration's). Throws std::runtime_error with
  // dta_last_error()'s message on failure.
  void Open(const std::string &config_toml, const std::string &region_dir);
  // The UDP port telemetry packets arrive on (set before the application starts).
  void SetPort(uint16_t port) { m_port = port; }

  // Called for each datagram that reached the collector node and whose DTA header parses
  // (ingested or rejected by the translator: a delivery either way), with that header (reporter
  // id, sequence number), e.g. to log the delivery in the ground truth.
  using DeliveredCallback = std::function<void(const dta_header &h, const uint8_t *datagram,
                                               std::size_t len)>;
  void SetDeliveredCallback(DeliveredCallback cb) { m_delivered = std::move(cb); }

  // Ingest one telemetry payload (framed as above), as if it had arrived from `from`.
  // Returns the number of datagrams ingested without a reject.
  std::size_t HandleTelemetryPayload(const uint8_t *payload, std::size_t len,
                                     ns3::Ipv4Address from = ns3::Ipv4Address("127.0.0.1"));

  // The open collector, for queries (dta_query_*) and dta_collector_flush. Null before Open
  // and after the application is disposed (Simulator::Destroy closes it): query before.
  dta_collector *Collector() const { return m_collector; }
  const CollectorAppStats &Stats() const { return m_stats; }
  // dta_collector_flush, throwing on failure.
  void Flush();

 protected:
  void DoDispose() override;

 private:
  void StartApplication() override;
  void StopApplication() override;
  void HandleRead(ns3::Ptr<ns3::Socket> socket);

  dta_collector *m_collector = nullptr;
  uint16_t m_port = 0;
  ns3::Ptr<ns3::Socket> m_socket;
  CollectorAppStats m_stats;
  DeliveredCallback m_delivered;
  std::vector<uint8_t> m_rx;  // receive buffer, reused
};

}  // namespace dta_sim

#endif
