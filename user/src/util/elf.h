// What the tool reads from ELF files to place uprobes: a function's offset
// in its file, a structure member's offset from the DWARF debug
// information, and the shared objects a program loads (libelf, libdw).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nvmetrace {

// The file offset of function `name` in the ELF file at `path` (what a
// uprobe is placed at), from its symbol table or, stripped, its dynamic
// symbols; nothing when it has no such function.  Throws Error when the file
// cannot be read as ELF.
std::optional<uint64_t> elf_function_offset(const std::string& path, std::string_view name);

// offsetof(struct `type`, `member`) from the file's DWARF; nothing when the
// file has no such structure or member.  Throws Error when the file has no
// debug information at all (the caller says how to build it with some).
std::optional<uint64_t> dwarf_member_offset(const std::string& path, std::string_view type,
                                            std::string_view member);

// The files the dynamic loader maps for `program`, program first: what
// `ldd` prints (the loader itself run with LD_TRACE_LOADED_OBJECTS=1, the
// program not started).  Throws Error when the loader fails.
std::vector<std::string> loaded_objects(const std::string& program);

}  // namespace nvmetrace
