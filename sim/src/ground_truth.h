// The simulation's ground truth: every telemetry entry generated (its id, application, time,
// and what it says) and every delivery of one to the collector node, so that what the DTA
// stores answer can be checked against what was sent, and delays and losses counted.
//
// An entry is one DTA report in its own datagram; its id is (reporter id, sequence number) of
// the datagram header (EntryId), which the collector side reads back with
// dta_datagram_header.
#ifndef DTA_SIM_GROUND_TRUTH_H
#define DTA_SIM_GROUND_TRUTH_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ns3/nstime.h"

namespace dta_sim {

// The four telemetry applications of [InvisiFlow §6.1] "Sources", and the DTA primitive each
// lands in at the collector.
enum class App : uint8_t {
  PathTracing = 0,    // Postcarding
  LoadImbalance = 1,  // Key-Increment
  FlowSketch = 2,     // Sketch-Merge (Count-Min)
  DropNotice = 3,     // Append
};
constexpr std::size_t kApps = 4;
const char *AppName(App app);

inline uint64_t EntryId(uint32_t reporter_id, uint32_t seq) {
  return (static_cast<uint64_t>(reporter_id) << 32) | seq;
}

struct Entry {
  uint64_t id = 0;
  App app = App::PathTracing;
  int64_t generated_ns = 0;
  int64_t delivered_ns = -1;      // first delivery; -1: never delivered
  uint32_t deliveries = 0;        // > 1: duplicates arrived
  // What the entry reports, for checks against the stores: the report's key (flow 5-tuple,
  // port key, ...; list id for an Append), and its value (switch id, byte count, entry).
  std::array<uint8_t, 16> key{};
  uint8_t key_len = 0;
  uint64_t value = 0;
  uint8_t hop = 0;                // Postcarding: the hop index
};

class GroundTruth {
 public:
  // Log a generated entry. False (nothing logged) if the id was logged already.
  bool Generated(uint64_t id, App app, ns3::Time t, const uint8_t *key = nullptr,
                 std::size_t key_len = 0, uint64_t value = 0, uint8_t hop = 0);
  // Log a delivery to the collector node: the entry (its `deliveries` > 1 for a duplicate,
  // counted), or nullptr for an id never generated (counted).
  const Entry *Delivered(uint64_t id, ns3::Time t);

  const Entry *Find(uint64_t id) const;
  const std::vector<Entry> &Entries() const { return m_entries; }

  uint64_t GeneratedCount(App app) const { return m_generated[static_cast<std::size_t>(app)]; }
  uint64_t DeliveredCount(App app) const { return m_delivered[static_cast<std::size_t>(app)]; }
  uint64_t Duplicates() const { return m_duplicates; }
  uint64_t UnknownDeliveries() const { return m_unknown; }
  // Delivery delays (ns) of the delivered entries of `app`, in generation order.
  std::vector<int64_t> DelaysNs(App app) const;

  // One line per entry: id,app,generated_ns,delivered_ns,deliveries,key_hex,value,hop.
  // Throws std::runtime_error if the file cannot be written.
  void WriteCsv(const std::string &path) const;

 private:
  std::vector<Entry> m_entries;
  std::unordered_map<uint64_t, std::size_t> m_index;
  std::array<uint64_t, kApps> m_generated{};
  std::array<uint64_t, kApps> m_delivered{};
  uint64_t m_duplicates = 0;
  uint64_t m_unknown = 0;
};

}  // namespace dta_sim

#endif
