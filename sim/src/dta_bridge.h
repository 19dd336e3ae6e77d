// The simulation's view of the real DTA collector (the C ABI of crates/front/dta-capi): telemetry
// payloads that reach a collector node are ingested into the stores, and the metrics are computed
// by querying those stores at the end of a run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dta_collector_app.h"
#include "fabric.h"

namespace ifsim {

class DtaBridge {
 public:
  /// Opens the collector of a DTA configuration with its stores' region files in `region_dir`
  /// (empty: the configuration's). Returns false with `error` set when it cannot.
  bool Open(const std::string& config_path, const std::string& region_dir, std::string* error);
  bool IsOpen() const { return handle_ != nullptr; }
  /// Ingests one telemetry payload (length-prefixed DTA datagrams).
  void Ingest(const uint8_t* payload, size_t len);
  /// The switch ids of a flow's path as stored by Postcarding; false when the store has no
  /// complete path for the key.
  bool PostcardPath(const FlowKey& flow, uint32_t path_len, std::vector<uint32_t>* hops,
                    std::string* error);
  /// A load-imbalance counter (8-byte key of the Key-Increment store); false with `error` set
  /// when the query fails.
  bool PortBytes(const uint8_t* key, size_t key_len, uint64_t* value, std::string* error);
  /// A flow's Count-Min estimate from the ApproSync Sketch-Merge store of its half: 0 when a
  /// column it reads was never delivered (the store has nothing for it); false with `error` set
  /// when the query fails otherwise.
  bool SketchEstimate(uint32_t half, const FlowKey& flow, uint64_t* estimate, std::string* error);
  /// Entries stored in the Append lists 0..lists-1; -1 with `error` set when a query fails.
  int64_t AppendCount(uint32_t lists, std::string* error);
  /// The collector's counters; false when it is not open.
  bool Stats(dta_stats* out);
  /// "accepted"/"rejected" counters of the collector, as JSON (for the run's output).
  std::string StatsJson();
  void Close();
  ~DtaBridge() { Close(); }

 private:
  /// Writes what the translator still holds (partial Postcarding paths, Append batches) once,
  /// before the first query.
  void Flush();
  ns3::Ptr<dta_sim::DtaCollectorApp> app_;  // ingest (its framing) and the open collector
  void* handle_ = nullptr;                   // app_'s dta_collector*
  bool flushed_ = false;
};

}  // namespace ifsim
