// A fresh directory under the system's temporary directory for one test,
// removed with everything in it when the test ends.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace nvmetrace::test {

class TempDir {
public:
    explicit TempDir(const std::string& prefix = "nvmetrace-test") {
        std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
        if (!mkdtemp(tmpl.data()))
            throw std::runtime_error("mkdtemp " + tmpl + " failed");
        dir_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& root() const { return dir_; }
    // The path of a file in the directory.
    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    std::string operator/(const std::string& name) const { return path(name); }

private:
    std::filesystem::path dir_;
};

}  // namespace nvmetrace::test
