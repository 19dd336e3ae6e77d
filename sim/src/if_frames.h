// Per-hop frames of the pull-based channels ([InvisiFlow §4], Figure 4), carried as IPv4 payload
// of protocol kIfProto between neighbours:
//   byte 0     frame type (FrameType)
//   byte 1     flags (bit 0: a reflected pull, not reflected again) / entry count (Data)
//   bytes 2-3  destination group (0: the collectors)
//   bytes 4-7  the sender's telemetry buffer usage in bytes, big-endian
// A Data frame continues with its telemetry payload: the framing DtaCollectorApp takes, a
// sequence of DTA datagrams each prefixed by its length as a big-endian u16.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ifsim {

enum class FrameType : uint8_t {
  /// A seed in the lowest band; becomes a Pull with the current usage when the port is free.
  Seed = 1,
  /// A pull request carrying the sender's buffer usage.
  Pull = 2,
  /// A received pull waiting in the pull band; becomes Data (or a reflected Pull) when the port
  /// is free.
  ReplyToken = 3,
  /// Telemetry entries.
  Data = 4,
};

constexpr size_t kFrameHeader = 8;
constexpr uint8_t kFlagReflected = 1;

inline void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void PutU32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline uint16_t GetU16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t GetU32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

}  // namespace ifsim
