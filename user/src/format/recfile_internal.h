// Helpers shared by the recording's writer (recfile_writer.cc) and reader
// (recfile_reader.cc); not part of the format's interface.
#pragma once

#include "format/recfile.h"

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <string>

namespace nvmetrace::recfile_internal {

int64_t clock_ns(clockid_t clock);
// strerrordesc_np's text, or "error N".
std::string errno_text(int err);
// The CRC of a block header's bytes before its header_crc field.
uint32_t header_crc(const BlockHeader& hdr);
const char* block_type_name(uint16_t type);
// Reads up to n bytes at off, fewer only at end of file.  -errno on error.
ssize_t pread_full(int fd, void* buf, size_t n, uint64_t off);

}  // namespace nvmetrace::recfile_internal
