#include "ground_truth.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace dta_sim {

const char *AppName(App app) {
  switch (app) {
    case App::PathTracing: return "path_tracing";
    case App::LoadImbalance: return "load_imbalance";
    case App::FlowSketch: return "flow_sketch";
    case App::DropNotice: return "drop_notice";
  }
  return "unknown";
}

bool GroundTruth::Generated(uint64_t id, App app, ns3::Time t, const uint8_t *key,
                            std::size_t key_len, uint64_t value, uint8_t hop) {
  if (m_index.count(id) != 0) return false;
  Entry e;
  e.id = id;
  e.app = app;
  e.generated_ns = t.GetNanoSeconds();
  e.key_len = static_cast<uint8_t>(std::min(key_len, e.key.size()));
  if (key != nullptr) std::copy(key, key + e.key_len, e.key.begin());
  e.value = value;
  e.hop = hop;
  m_index.emplace(id, m_entries.size());
  m_entries.push_back(e);
  ++m_generated[static_cast<std::size_t>(app)];
  return true;
}

const Entry *GroundTruth::Delivered(uint64_t id, ns3::Time t) {
  auto it = m_index.find(id);
  if (it == m_index.end()) {
    ++m_unknown;
    return nullptr;
  }
  Entry &e = m_entries[it->second];
  if (e.deliveries++ == 0) {
    e.delivered_ns = t.GetNanoSeconds();
    ++m_delivered[static_cast<std::size_t>(e.app)];
  } else {
    ++m_duplicates;
  }
  return &e;
}

const Entry *GroundTruth::Find(uint64_t id) const {
  auto it = m_index.find(id);
  return it == m_index.end() ? nullptr : &m_entries[it->second];
}

std::vector<int64_t> GroundTruth::DelaysNs(App app) const {
  std::vector<int64_t> out;
  for (const Entry &e : m_entries) {
    if (e.app == app && e.delivered_ns >= 0) out.push_back(e.delivered_ns - e.generated_ns);
  }
  return out;
}

void GroundTruth::WriteCsv(const std::string &path) const {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << "id,app,generated_ns,delivered_ns,deliveries,key_hex,value,hop\n";
  char hex[3];
  for (const Entry &e : m_entries) {
    f << e.id << ',' << AppName(e.app) << ',' << e.generated_ns << ',' << e.delivered_ns << ','
      << e.deliveries << ',';
    for (std::size_t i = 0; i < e.key_len; ++i) {
      std::snprintf(hex, sizeof hex, "%02x", e.key[i]);
      f << hex;
    }
    f << ',' << e.value << ',' << static_cast<unsigned>(e.hop) << '\n';
  }
  if (!f) throw std::runtime_error("error writing " + path);
}

}  // namespace dta_sim
