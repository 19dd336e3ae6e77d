#include "dta_bridge.h"

#include <sstream>

#include "dta/dta.h"
#include "if_frames.h"

namespace ifsim {

namespace {
// Store names of examples/invisiflow.toml, one per telemetry application.
constexpr const char* kPathStore = "paths";
constexpr const char* kPortBytesStore = "port_bytes";
constexpr const char* kFlowCountStore = "flow_counts";
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

bool DtaBridge::Open(const std::string& config_path, std::string* error) {
  dta_collector* c = nullptr;
  int rc = dta_collector_open(config_path.c_str(), &c);
  if (rc != DTA_E_OK) {
    *error = LastError("dta_collector_open", rc);
    return false;
  }
  handle_ = c;
  return true;
}

void DtaBridge::Ingest(const uint8_t* payload, size_t len) {
  if (!handle_) return;
  size_t at = 0;
  while (at + 2 <= len) {
    uint16_t n = GetU16(payload + at);
    if (at + 2 + n > len) break;
    // A rejected report is counted by the collector (dta_collector_stats) and reported in the
    // run's JSON; the run goes on.
    (void)dta_collector_ingest(H(handle_), payload + at + 2, n);
    at += 2 + n;
  }
}

void DtaBridge::Flush() {
  if (handle_ && !flushed_) {
    dta_collector_flush(H(handle_));
    flushed_ = true;
  }
}

bool DtaBridge::PostcardPath(uint64_t flow, uint32_t path_len, std::vector<uint32_t>* hops,
                             std::string* error) {
  Flush();
  uint8_t key[8];
  for (int i = 7; i >= 0; i--) key[7 - i] = static_cast<uint8_t>(flow >> (8 * i));
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

bool DtaBridge::KeyIncrement(const uint8_t* key, size_t key_len, uint64_t* value,
                             std::string* error) {
  Flush();
  const char* store = key_len == 8 ? kPortBytesStore : kFlowCountStore;
  int rc = dta_query_key_increment(H(handle_), store, key, key_len, value);
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

int64_t DtaBridge::AppendCount(uint32_t list, std::string* error) {
  Flush();
  std::vector<uint8_t> buf(1 << 16);
  uint64_t tail = DTA_TAIL_OLDEST;
  int64_t total = 0;
  for (int rounds = 0; rounds < 1 << 16; rounds++) {
    dta_list_read r{};
    int rc = dta_query_append_read(H(handle_), kDropStore, list, tail, buf.data(), buf.size(), &r);
    if (rc == DTA_E_EMPTY) return total;
    if (rc != DTA_E_OK) {
      *error = LastError("dta_query_append_read", rc);
      return -1;
    }
    total += static_cast<int64_t>(r.entries);
    if (r.entries == 0 || r.next_tail == tail) return total;
    tail = r.next_tail;
  }
  return total;
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
  o << "}, \"postcard_paths_complete\": " << s.postcard_chunks_complete
    << ", \"postcard_paths_timeout\": " << s.postcard_chunks_timeout << "}";
  return o.str();
}

void DtaBridge::Close() {
  if (handle_) dta_collector_close(H(handle_));
  handle_ = nullptr;
}

}  // namespace ifsim
