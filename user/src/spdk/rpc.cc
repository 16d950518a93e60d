#include "spdk/rpc.h"

#include "util/error.h"
#include "util/fd.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>

namespace nvmetrace::spdk {

nlohmann::json rpc_call(const std::string& socket_path, const std::string& method, int timeout_ms) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof(addr.sun_path))
        throw Error(fmt::format("SPDK RPC socket {}: path too long", socket_path));
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0)
        throw errno_error("socket(AF_UNIX)", errno);
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) < 0)
        throw errno_error(fmt::format("cannot reach SPDK's RPC socket {}", socket_path), errno);
    const std::string req =
        nlohmann::json{{"jsonrpc", "2.0"}, {"method", method}, {"id", 1}}.dump();
    for (size_t sent = 0; sent < req.size();) {
        const ssize_t n = send(fd.get(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw errno_error(fmt::format("SPDK RPC {}: send", method), errno);
        sent += static_cast<size_t>(n);
    }
    // the reply is one JSON object, in as many reads as it takes
    std::string buf;
    char chunk[65536];
    for (;;) {
        pollfd p{fd.get(), POLLIN, 0};
        const int r = ::poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            throw Error(fmt::format("SPDK RPC {} on {}: no reply in {} ms", method, socket_path,
                                    timeout_ms));
        const ssize_t n = recv(fd.get(), chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw errno_error(fmt::format("SPDK RPC {}: recv", method), errno);
        if (n > 0)
            buf.append(chunk, static_cast<size_t>(n));
        nlohmann::json reply = nlohmann::json::parse(buf, nullptr, false);
        if (!reply.is_discarded()) {
            if (!reply.is_object())
                throw Error(fmt::format("SPDK RPC {}: the reply is not an object", method));
            if (const auto e = reply.find("error"); e != reply.end())
                throw Error(fmt::format("SPDK RPC {}: {}", method, e->dump()));
            if (const auto res = reply.find("result"); res != reply.end())
                return *res;
            throw Error(fmt::format("SPDK RPC {}: the reply has no result", method));
        }
        if (n == 0)
            throw Error(
                fmt::format("SPDK RPC {}: the socket closed before a whole reply ({} "
                            "bytes)",
                            method, buf.size()));
        if (buf.size() > (64u << 20))
            throw Error(fmt::format("SPDK RPC {}: a reply of more than 64 MiB", method));
    }
}

namespace {

uint32_t u32_or_0(const nlohmann::json& o, const char* key) {
    const auto it = o.find(key);
    if (it == o.end() || !it->is_number_unsigned() || it->get<uint64_t>() > UINT32_MAX)
        return 0;
    return static_cast<uint32_t>(it->get<uint64_t>());
}

std::string str_or_empty(const nlohmann::json& o, const char* key) {
    const auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::vector<SpdkNamespace> namespaces_of(const nlohmann::json& subsystems,
                                         const nlohmann::json& bdevs) {
    if (!subsystems.is_array() || !bdevs.is_array())
        throw Error("SPDK RPC: nvmf_get_subsystems and bdev_get_bdevs answer arrays");
    std::vector<SpdkNamespace> out;
    for (const auto& s : subsystems) {
        if (!s.is_object() || !s.contains("namespaces") || !s["namespaces"].is_array())
            continue;  // the discovery subsystem has none
        const std::string nqn = str_or_empty(s, "nqn");
        for (const auto& n : s["namespaces"]) {
            if (!n.is_object())
                continue;
            SpdkNamespace ns;
            ns.subsysnqn = nqn;
            ns.nsid = u32_or_0(n, "nsid");
            ns.bdev = str_or_empty(n, "bdev_name");
            for (const auto& b : bdevs)
                if (b.is_object() && str_or_empty(b, "name") == ns.bdev)
                    ns.block_size = u32_or_0(b, "block_size");
            if (ns.nsid && !ns.bdev.empty())
                out.push_back(std::move(ns));
        }
    }
    return out;
}

}  // namespace nvmetrace::spdk
