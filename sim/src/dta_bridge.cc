#include "dta_bridge.h"

#include <sstream>

#include <stdexcept>

#include "dta/dta.h"
#include "dta_collector_app.h"
#include "if_frames.h"
#include "sim_context.h"

namespace ifsim {

namespace {
// Store names of examples/invisiflow.toml, one per telemetry application.
constexpr const char* kPathStore = "paths";
constexpr const char* kPortBytesStore = "portbytes";
const char* const kFlowSketchStores[kCmsHalves] = {"flowsync0", "flowsync1"};
constexpr const char* kDropStore = "drops";

dta_collector* H(void* p) { return static_cast<dta_collector*>(p); }

std::string LastError(const char* what, int rc) {
  std::string m = what;
  m += ": ";
  m += dta_error_name(rc);
  const char* e = dta_last_error();
  if (e && *e) {
    m += ": ";
    m += e;
  }
  return m;
}
}  // namespace

bool DtaBridge::Open(const std::string& config_path, const std::string& region_dir,
                     std::string* error) {
  app_ = ns3::CreateObject<dta_sim::DtaCollectorApp>();
  try {
    app_->Open(config_path, region_dir);
  } catch (const std::runtime_error& e) {
    *error = e.what();
    app_ = nullptr;
    return false;
  }
  handle_ = app_->Collector();
  return true;
}

void DtaBridge::Ingest(const uint8_t* payload, size_t len) {
  // A rejected report is counted by the collector (dta_collector_stats, in the run's JSON).
  if (app_) app_->HandleTelemetryPayload(payload, len);
}

void DtaBridge::Flush() {
  if (app_ && !flushed_) {
    app_->Flush();
    flushed_ = true;
  }
}

bool DtaBridge::PostcardPath(const FlowKey& flow, uint32_t path_len, std::vector<uint32_t>* hops,
                             std::string* error) {
  Flush();
  uint8_t key[kFlowKeyLen];
  flow.Encode(key);
  uint32_t out[16];
  size_t n = 0;
  int rc = dta_query_postcard_path(H(handle_), kPathStore, key, sizeof key, out, 16, &n);
  if (rc == DTA_E_EMPTY || rc == DTA_E_AMBIGUOUS) {
    hops->clear();
    return false;  // no answer: the path is missing, not an error
  }
  if (rc != DTA_E_OK) {
    *error = LastError("dta_query_postcard_path", rc);
    return false;
  }
  hops->assign(out, out + std::min<size_t>(n, path_len));
  return true;
}

uint32_t CmsHalfOf(const uint8_t* key, size_t len) {
  uint32_t half = 0;
  // Cannot fail: a 13-byte key and a power-of-two column count.
  dta_sketch_cm_column(key, len, kCmsRows, kCmsHalves, &half);
  return half;
}

CmsCells CmsCellsOf(const FlowKey& k) {
  uint8_t key[kFlowKeyLen];
  k.Encode(key);
  CmsCells c;
  c.half = CmsHalfOf(key, sizeof key);
  for (uint32_t r = 0; r < kCmsRows; r++)
    dta_sketch_cm_column(key, sizeof key, r, kCmsHalfCols, &c.col[r]);
  return c;
}

bool DtaBridge::SketchEstimate(uint32_t half, const FlowKey& flow, uint64_t* estimate,
                               std::string* error) {
  Flush();
  uint8_t key[kFlowKeyLen];
  flow.Encode(key);
  int rc = dta_query_sketch(H(handle_), kFlowSketchStores[half % kCmsHalves], key, sizeof key,
                            estimate);
  if (rc == DTA_E_NOT_MERGED) {
    *estimate = 0;
    return true;
  }
  if (rc != DTA_E_OK) {
    *error = LastError("dta_query_sketch", rc);
    return false;
  }
  return true;
}

bool DtaBridge::PortBytes(const uint8_t* key, size_t key_len, uint64_t* value,
                          std::string* error) {
  Flush();
  int rc = dta_query_key_increment(H(handle_), kPortBytesStore, key, key_len, value);
  if (rc == DTA_E_EMPTY) {
    *value = 0;
    return true;
  }
  if (rc != DTA_E_OK) {
    *error = LastError("dta_query_key_increment", rc);
    return false;
  }
  return true;
}

int64_t DtaBridge::AppendCount(uint32_t lists, std::string* error) {
  Flush();
  std::vector<uint8_t> buf(1 << 16);
  int64_t total = 0;
  for (uint32_t list = 0; list < lists; list++) {
    uint64_t tail = DTA_TAIL_OLDEST;
    // Bounded: each round reads at least one entry of a list of bounded capacity.
    for (int rounds = 0; rounds < 1 << 16; rounds++) {
      dta_list_read r{};
      int rc =
          dta_query_append_read(H(handle_), kDropStore, list, tail, buf.data(), buf.size(), &r);
      if (rc == DTA_E_EMPTY) break;
      if (rc != DTA_E_OK) {
        *error = LastError("dta_query_append_read", rc);
        return -1;
      }
      total += static_cast<int64_t>(r.entries);
      if (r.entries == 0 || r.next_tail == tail) break;
      tail = r.next_tail;
    }
  }
  return total;
}

bool DtaBridge::Stats(dta_stats* out) {
  if (!handle_) return false;
  Flush();
  return dta_collector_stats(H(handle_), out) == DTA_E_OK;
}

std::string DtaBridge::StatsJson() {
  if (!handle_) return "null";
  Flush();
  dta_stats s{};
  if (dta_collector_stats(H(handle_), &s) != DTA_E_OK) return "null";
  std::ostringstream o;
  o << "{\"datagrams\": " << s.datagrams << ", \"reports\": [";
  for (int i = 0; i < DTA_PRIMITIVES; i++) o << (i ? ", " : "") << s.reports[i];
  o << "], \"rejected\": " << s.rejected << ", \"rejects\": {";
  bool first = true;
  for (size_t i = 0; i < DTA_REJECT_REASONS; i++) {
    if (!s.rejects[i]) continue;
    const char* name = dta_reject_reason_name(i);
    o << (first ? "" : ", ") << "\"" << (name ? name : "?") << "\": " << s.rejects[i];
    first = false;
  }
  const dta_sim::CollectorAppStats& a = app_->Stats();
  o << "}, \"framing_errors\": " << a.framing_errors << ", \"too_many\": " << a.too_many;
  o << ", \"postcard_paths_complete\": " << s.postcard_chunks_complete
    << ", \"postcard_paths_timeout\": " << s.postcard_chunks_timeout
    << ", \"postcard_paths_collision\": " << s.postcard_chunks_collision << "}";
  return o.str();
}

void DtaBridge::Close() {
  handle_ = nullptr;
  app_ = nullptr;  // the application closes its collector
}

}  // namespace ifsim
