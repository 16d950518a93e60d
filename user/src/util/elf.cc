#include "util/elf.h"

#include "util/error.h"
#include "util/fd.h"

#include <dwarf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>

#include <elfutils/libdw.h>
#include <fmt/core.h>

extern char** environ;

namespace nvmetrace {

namespace {

UniqueFd open_file(const std::string& path) {
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0)
        throw errno_error(fmt::format("cannot open {}", path), errno);
    return fd;
}

struct ElfCloser {
    void operator()(Elf* e) const { elf_end(e); }
};

// The symbol's value as a file offset: through the PT_LOAD segment holding it.
std::optional<uint64_t> file_offset(Elf* elf, uint64_t vaddr) {
    size_t n = 0;
    if (elf_getphdrnum(elf, &n) != 0)
        return std::nullopt;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD)
            continue;
        if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
            return vaddr - ph.p_vaddr + ph.p_offset;
    }
    return std::nullopt;
}

std::optional<uint64_t> find_in(Elf* elf, Elf_Scn* scn, const GElf_Shdr& sh,
                                std::string_view name) {
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || sh.sh_entsize == 0)
        return std::nullopt;
    const size_t count = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < count; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym))
            continue;
        if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
            continue;
        const char* s = elf_strptr(elf, sh.sh_link, sym.st_name);
        if (s && name == s)
            return file_offset(elf, sym.st_value);
    }
    return std::nullopt;
}

}  // namespace

std::optional<uint64_t> elf_function_offset(const std::string& path, std::string_view name) {
    elf_version(EV_CURRENT);
    UniqueFd fd = open_file(path);
    std::unique_ptr<Elf, ElfCloser> elf(elf_begin(fd.get(), ELF_C_READ, nullptr));
    if (!elf || elf_kind(elf.get()) != ELF_K_ELF)
        throw Error(fmt::format("{}: not an ELF file", path));
    // .symtab names local functions too; .dynsym only what the file exports
    for (const Elf64_Word want : {SHT_SYMTAB, SHT_DYNSYM}) {
        Elf_Scn* scn = nullptr;
        while ((scn = elf_nextscn(elf.get(), scn)) != nullptr) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != want)
                continue;
            if (auto off = find_in(elf.get(), scn, sh, name))
                return off;
        }
    }
    return std::nullopt;
}

std::optional<uint64_t> dwarf_member_offset(const std::string& path, std::string_view type,
                                            std::string_view member) {
    UniqueFd fd = open_file(path);
    Dwarf* dw = dwarf_begin(fd.get(), DWARF_C_READ);
    if (!dw)
        throw Error(fmt::format("{}: no debug information ({})", path, dwarf_errmsg(-1)));
    std::unique_ptr<Dwarf, int (*)(Dwarf*)> guard(dw, dwarf_end);
    Dwarf_Off off = 0, next = 0;
    size_t header = 0;
    while (dwarf_nextcu(dw, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
        Dwarf_Die cu, die;
        if (dwarf_offdie(dw, off + header, &cu) && dwarf_child(&cu, &die) == 0) {
            do {
                if (dwarf_tag(&die) != DW_TAG_structure_type ||
                    dwarf_hasattr(&die, DW_AT_declaration))
                    continue;
                const char* n = dwarf_diename(&die);
                if (!n || type != n)
                    continue;
                Dwarf_Die m;
                if (dwarf_child(&die, &m) != 0)
                    continue;
                do {
                    const char* mn = dwarf_diename(&m);
                    if (dwarf_tag(&m) != DW_TAG_member || !mn || member != mn)
                        continue;
                    Dwarf_Attribute a;
                    Dwarf_Word w = 0;
                    if (dwarf_attr(&m, DW_AT_data_member_location, &a) &&
                        dwarf_formudata(&a, &w) == 0)
                        return w;
                } while (dwarf_siblingof(&m, &m) == 0);
            } while (dwarf_siblingof(&die, &die) == 0);
        }
        off = next;
    }
    return std::nullopt;
}

std::vector<std::string> loaded_objects(const std::string& program) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        throw errno_error("pipe", errno);
    UniqueFd rd(p[0]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    std::vector<std::string> env_s;
    for (char** e = environ; *e; e++)
        if (std::strncmp(*e, "LD_TRACE_LOADED_OBJECTS=", 24) != 0)
            env_s.emplace_back(*e);
    env_s.emplace_back("LD_TRACE_LOADED_OBJECTS=1");
    std::vector<char*> envp;
    for (auto& s : env_s)
        envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string prog = program;
    char* argv[] = {prog.data(), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, prog.c_str(), &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0)
        throw errno_error(fmt::format("cannot run {}'s loader", program), rc);
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = read(rd.get(), buf, sizeof buf);
        if (n > 0)
            out.append(buf, static_cast<size_t>(n));
        else if (n == 0 || errno != EINTR)
            break;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        throw Error(fmt::format("{}: the dynamic loader could not list its libraries", program));
    std::vector<std::string> files{std::filesystem::absolute(program).string()};
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        // "\tlibfoo.so.1 => /path/libfoo.so.1 (0x...)", or "\t/lib64/ld-linux... (0x...)"
        std::string file;
        if (const auto arrow = line.find(" => "); arrow != std::string::npos)
            file = line.substr(arrow + 4);
        else
            file = line.substr(line.find_first_not_of(" \t") == std::string::npos
                                   ? line.size()
                                   : line.find_first_not_of(" \t"));
        if (const auto paren = file.rfind(" ("); paren != std::string::npos)
            file.resize(paren);
        if (!file.empty() && file.front() == '/')
            files.push_back(std::filesystem::weakly_canonical(file).string());
    }
    return files;
}

}  // namespace nvmetrace
