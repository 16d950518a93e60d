#include "util/child_process.h"

#include "tempdir.h"
#include "util/error.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/core.h>
#include <gtest/gtest.h>

namespace nvmetrace {
namespace {

std::string error_of(const std::string& name) {
    try {
        resolve_command(name);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(ResolveCommand, FoundInPathAsAShellWould) {
    const std::string sh = resolve_command("sh");
    EXPECT_TRUE(sh.ends_with("/sh")) << sh;
    EXPECT_EQ(resolve_command("/bin/sh"), "/bin/sh");
}

TEST(ResolveCommand, WhyACommandCannotRun) {
    test::TempDir dir;
    EXPECT_NE(error_of("no-such-program-nvmetrace").find("not found in PATH"), std::string::npos);
    EXPECT_NE(error_of(dir / "none").find("no such file"), std::string::npos);
    EXPECT_NE(error_of(dir.root().string()).find("a folder"), std::string::npos);
    std::ofstream(dir / "script") << "#!/bin/sh\nexit 0\n";
    EXPECT_NE(error_of(dir / "script").find("not executable"), std::string::npos);
    std::filesystem::permissions(dir / "script", std::filesystem::perms::owner_exec,
                                 std::filesystem::perm_options::add);
    EXPECT_EQ(error_of(dir / "script"), "");
    EXPECT_NE(error_of("").find("give one after --"), std::string::npos);
}

TEST(ResolveCommand, SearchesEveryFolderOfPath) {
    test::TempDir dir;
    std::filesystem::create_directory(dir / "a");
    std::filesystem::create_directory(dir / "b");
    std::ofstream(dir / "a/tool") << "not executable\n";
    std::ofstream(dir / "b/tool") << "#!/bin/sh\n";
    std::filesystem::permissions(dir / "b/tool", std::filesystem::perms::owner_exec,
                                 std::filesystem::perm_options::add);
    const char* old = getenv("PATH");
    const std::string saved = old ? old : "";
    setenv("PATH", (dir / "a:" + dir / "b").c_str(), 1);
    const std::string found = error_of("tool").empty() ? resolve_command("tool") : "";
    setenv("PATH", (dir / "a").c_str(), 1);
    const std::string why = error_of("tool");
    setenv("PATH", saved.c_str(), 1);
    EXPECT_EQ(found, dir / "b/tool");
    EXPECT_NE(why.find("not executable"), std::string::npos) << why;
}

TEST(ChildProcess, ExitCodeAsTheShellGivesIt) {
    ChildProcess c = ChildProcess::start({"sh", "-c", "exit 3"});
    EXPECT_EQ(c.wait(), 3);
    EXPECT_TRUE(c.exited());
    EXPECT_EQ(c.status(), 3);
    ChildProcess k = ChildProcess::start({"sh", "-c", "kill -TERM $$"});
    EXPECT_EQ(k.wait(), 128 + SIGTERM);
}

TEST(ChildProcess, BeforeExecRunsWhileTheChildIsStillUs) {
    // before_exec sees the forked copy of this test, not yet the command
    std::filesystem::path seen;
    ChildProcess c = ChildProcess::start({"sh", "-c", "exit 4"}, -1, [&seen](pid_t pid) {
        seen = std::filesystem::read_symlink(fmt::format("/proc/{}/exe", pid));
    });
    EXPECT_EQ(seen, std::filesystem::read_symlink("/proc/self/exe"));
    EXPECT_EQ(c.wait(), 4);  // and then it runs the command
}

TEST(ChildProcess, ABeforeExecThatThrowsRunsNoCommand) {
    test::TempDir dir;
    const auto mark = dir / "ran";
    pid_t child = -1;
    EXPECT_THROW(ChildProcess::start({"touch", mark}, -1,
                                     [&child](pid_t pid) {
                                         child = pid;
                                         throw Error("no events");
                                     }),
                 Error);
    ASSERT_GT(child, 0);
    EXPECT_FALSE(std::filesystem::exists(mark));
    EXPECT_NE(kill(child, 0), 0);  // reaped: no such process
}

TEST(ChildProcess, PidfdIsReadableOnceItExits) {
    test::TempDir dir;
    ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
    ChildProcess c = ChildProcess::start({"sh", "-c", "read x < \"$0\"", dir / "fifo"});
    // not yet: it waits for the FIFO's writer
    pollfd p{c.pidfd(), POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 0), 0);
    EXPECT_FALSE(c.exited());
    std::ofstream(dir / "fifo") << "go\n";
    EXPECT_EQ(poll(&p, 1, 10'000), 1);
    EXPECT_EQ(c.wait(), 0);
}

TEST(ChildProcess, WaitTimesOutThenASignalEndsIt) {
    ChildProcess c = ChildProcess::start({"sleep", "100"});
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(c.wait(100), std::nullopt);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(90));
    c.signal(SIGTERM);
    EXPECT_EQ(c.wait(10'000), 128 + SIGTERM);
}

TEST(ChildProcess, ACommandThatCannotRunIsAnError) {
    test::TempDir dir;
    std::ofstream(dir / "x") << "data\n";
    try {
        ChildProcess::start({dir / "x"});
        FAIL() << "started a file that is not executable";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not executable"), std::string::npos) << e.what();
    }
    // executable, but exec() refuses it: the child's errno comes back
    std::ofstream(dir / "y") << "\x7f"
                                "ELF garbage";
    std::filesystem::permissions(dir / "y", std::filesystem::perms::owner_exec,
                                 std::filesystem::perm_options::add);
    try {
        ChildProcess::start({dir / "y"});
        FAIL() << "exec of a broken ELF succeeded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot run"), std::string::npos) << e.what();
    }
}

TEST(ShellWords, QuotesOnlyWhatAShellWouldSplitOrExpand) {
    EXPECT_EQ(shell_words({"nvmetrace", "bench", "/dev/ng0n1", "--cpus", "1,3", "-d", "2"}),
              "nvmetrace bench /dev/ng0n1 --cpus 1,3 -d 2");
    EXPECT_EQ(shell_words({"--spdk-args", "--no-huge -s 256"}), "--spdk-args '--no-huge -s 256'");
    EXPECT_EQ(shell_words({"a", "", "b"}), "a '' b");
    EXPECT_EQ(shell_words({"it's", "$HOME", "*"}), "'it'\\''s' '$HOME' '*'");
    EXPECT_EQ(shell_words({}), "");
}

}  // namespace
}  // namespace nvmetrace
