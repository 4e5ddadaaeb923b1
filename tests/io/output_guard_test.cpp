// The user's data (io/output_guard.hpp, io/atomic_file.hpp, io/dir_lock.hpp): outputs never
// over or inside inputs whatever the spelling, directories replaced only when genemask
// wrote them and --force says so, the marker last, one writer, names of any legal length.
#include "io/output_guard.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/atomic_file.hpp"
#include "io/dir_lock.hpp"
#include "io/error.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

nlohmann::json marker(const std::string& dir) {
  std::ifstream in(dir + "/.genemask.json");
  return nlohmann::json::parse(in);
}

std::vector<std::string> names(const std::string& dir) {
  std::vector<std::string> n;
  for (const auto& e : fs::directory_iterator(dir)) n.push_back(e.path().filename().string());
  std::sort(n.begin(), n.end());
  return n;
}

}  // namespace

TEST(CheckOutputs, SeesThroughSpellingsSymlinksAndHardLinks) {
  TempDir tmp;
  const std::string g = tmp.file("g.fa");
  test::write_file(g, ">a\nACGT\n");
  ASSERT_EQ(::symlink(g.c_str(), tmp.file("link.fa").c_str()), 0);
  ASSERT_EQ(::link(g.c_str(), tmp.file("hard.fa").c_str()), 0);
  fs::create_directories(tmp.file("in/sub"));
  const std::vector<io::NamedPath> in = {{"--genome", g}, {"--shards", tmp.file("in")}};
  for (const std::string& out : {g, tmp.path() + "/./g.fa", tmp.path() + "/in/../g.fa", tmp.file("link.fa"),
                                 tmp.file("hard.fa")}) {
    const std::string e = error_of([&] { io::check_outputs(in, {{"--out", out, io::OutputKind::file}}); });
    EXPECT_NE(e.find("--out " + out + " is the file --genome " + g), std::string::npos) << e;
  }
  for (const std::string& out : {tmp.file("in/x.h5"), tmp.file("in/sub/new/x.h5"), tmp.file("in")}) {
    const std::string e = error_of([&] { io::check_outputs(in, {{"--out", out, io::OutputKind::directory}}); });
    EXPECT_NE(e.find("--shards " + tmp.file("in")), std::string::npos) << out << ": " << e;
  }
  // Beside the inputs, or holding them: allowed.
  EXPECT_EQ(error_of([&] { io::check_outputs(in, {{"--out", tmp.file("c.h5"), io::OutputKind::file}}); }), "");
  EXPECT_EQ(error_of([&] { io::check_outputs(in, {{"--out", tmp.path(), io::OutputKind::directory}}); }), "");
  // Inputs that do not exist (a built-in model name) are not compared.
  EXPECT_EQ(error_of([&] {
              io::check_outputs({{"--model", "logo"}}, {{"--out", tmp.file("logo"), io::OutputKind::directory}});
            }),
            "");
}

TEST(CheckOutputs, RefusesDevicesFifosAndWrongKinds) {
  TempDir tmp;
  ASSERT_EQ(::mkfifo(tmp.file("fifo").c_str(), 0644), 0);
  EXPECT_NE(error_of([&] { io::check_outputs({}, {{"--out", "/dev/null", io::OutputKind::file}}); })
                .find("is a character device"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::check_outputs({}, {{"--out", tmp.file("fifo"), io::OutputKind::file}}); })
                .find("FIFO"),
            std::string::npos);
  test::write_file(tmp.file("f"), "x");
  EXPECT_NE(error_of([&] { io::check_outputs({}, {{"--out", tmp.file("f"), io::OutputKind::directory}}); })
                .find("is not a directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::check_outputs({}, {{"--out", tmp.path(), io::OutputKind::file}}); })
                .find("is a directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              io::check_outputs({}, {{"--out", tmp.file("d"), io::OutputKind::directory},
                                     {"--save-model", tmp.file("d"), io::OutputKind::directory}});
            }).find("same path"),
            std::string::npos);
}

TEST(InputsInUse, EveryTemporaryChecksThem) {
  TempDir tmp;
  const std::string plan = tmp.file("plan.json");
  test::write_file(plan, "{}");
  {
    const io::InputsInUse guard({{"--plan", plan}});
    const std::string e = error_of([&] { io::AtomicFile f(tmp.path() + "/./plan.json"); });
    EXPECT_NE(e.find("it is --plan " + plan), std::string::npos) << e;
    EXPECT_EQ(test::read_file(plan), "{}");
    EXPECT_NE(error_of([&] { io::AtomicFile f("/dev/null"); }).find("character device"), std::string::npos);
  }
  io::AtomicFile f(plan);  // the guard is gone: an ordinary output again
  f.stream() << "[]";
  f.commit();
  EXPECT_EQ(test::read_file(plan), "[]");
}

TEST(OutputSet, NewDirectoryAppearsWithItsMarkerLast) {
  TempDir tmp;
  const std::string d = tmp.file("a/b/out");
  {
    io::OutputSet set(d, {"dataset promoter", "--out", false, "summary.json"});
    EXPECT_TRUE(fs::exists(d + "/.genemask.lock"));
    test::write_file(set.staging() + "/train.tsv", "t");
    test::write_file(set.staging() + "/summary.json", "{}");
    EXPECT_FALSE(fs::exists(d + "/train.tsv"));  // nothing visible before publish
    set.publish({{"seed", 7}});
  }
  EXPECT_EQ(names(d), (std::vector<std::string>{".genemask.json", "summary.json", "train.tsv"}));
  const auto m = marker(d);
  EXPECT_EQ(m["command"], "dataset promoter");
  EXPECT_TRUE(m["complete"].get<bool>());
  EXPECT_EQ(m["entries"], nlohmann::json({"train.tsv", "summary.json"}));  // read_first last
  EXPECT_EQ(m["seed"], 7);
  EXPECT_NO_THROW(io::check_output_complete(d));
}

TEST(OutputSet, AFailureLeavesNothingNewAndTheOldOutputUntouched) {
  TempDir tmp;
  const std::string d = tmp.file("new/out");
  try {
    io::OutputSet set(d, {"report", "--out", false, ""});
    test::write_file(set.staging() + "/table1.md", "x");
    throw std::runtime_error("the command failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fs::exists(tmp.file("new")));  // the parents it made go too
  const std::string old = tmp.file("old");
  {
    io::OutputSet set(old, {"report", "--out", false, ""});
    test::write_file(set.staging() + "/table1.md", "first");
    set.publish();
  }
  try {
    io::OutputSet set(old, {"report", "--out", true, ""});
    test::write_file(set.staging() + "/table1.md", "second");
    throw std::runtime_error("the command failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(test::read_file(old + "/table1.md"), "first");
  EXPECT_EQ(names(old), (std::vector<std::string>{".genemask.json", "table1.md"}));
}

TEST(OutputSet, ReplacesOnlyItsOwnEntriesAndOnlyWithForce) {
  TempDir tmp;
  const std::string d = tmp.file("out");
  {
    io::OutputSet set(d, {"dataset splice", "--out", false, "summary.json"});
    fs::create_directories(set.staging() + "/fewshot/10");
    test::write_file(set.staging() + "/fewshot/10/train.tsv", "old split");
    test::write_file(set.staging() + "/summary.json", "{}");
    set.publish();
  }
  test::write_file(d + "/mine.txt", "the user's");
  const std::string e = error_of([&] { io::OutputSet set(d, {"dataset splice", "--out", false, ""}); });
  EXPECT_NE(e.find("earlier output of `genemask dataset splice`"), std::string::npos) << e;
  EXPECT_NE(e.find("--force"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { io::OutputSet set(d, {"report", "--out", true, ""}); })
                .find("holds the output of `genemask dataset splice`, not of `genemask report`"),
            std::string::npos);
  {
    io::OutputSet set(d, {"dataset splice", "--out", true, "summary.json"});
    fs::create_directories(set.staging() + "/fewshot/20");
    test::write_file(set.staging() + "/fewshot/20/train.tsv", "new split");
    test::write_file(set.staging() + "/summary.json", "{\"new\": 1}");
    set.publish();
  }
  EXPECT_FALSE(fs::exists(d + "/fewshot/10"));  // the old split's sets go with it
  EXPECT_EQ(test::read_file(d + "/fewshot/20/train.tsv"), "new split");
  EXPECT_EQ(test::read_file(d + "/mine.txt"), "the user's");
  // A file of the user's in the way of a new entry is refused, not replaced.
  test::write_file(d + "/extra.tsv", "mine too");
  {
    io::OutputSet set(d, {"dataset splice", "--out", true, "summary.json"});
    test::write_file(set.staging() + "/extra.tsv", "genemask's");
    const std::string in_way = error_of([&] { set.publish(); });
    EXPECT_NE(in_way.find(d + "/extra.tsv is in the way"), std::string::npos) << in_way;
  }
  EXPECT_EQ(test::read_file(d + "/extra.tsv"), "mine too");
}

TEST(OutputSet, RefusesDirectoriesOfOtherFilesAndFiles) {
  TempDir tmp;
  fs::create_directories(tmp.file("user/sub"));
  test::write_file(tmp.file("user/notes.txt"), "x");
  for (bool force : {false, true}) {
    const std::string e = error_of([&] { io::OutputSet set(tmp.file("user"), {"export-hf", "--out", force, ""}); });
    EXPECT_NE(e.find("is not empty (2 entries, first 'notes.txt') and holds no output of genemask"), std::string::npos)
        << e;
  }
  EXPECT_EQ(names(tmp.file("user")), (std::vector<std::string>{"notes.txt", "sub"}));
  test::write_file(tmp.file("file"), "x");
  EXPECT_NE(error_of([&] { io::OutputSet set(tmp.file("file"), {"export-hf", "--out", true, ""}); })
                .find("exists and is not a directory"),
            std::string::npos);
  EXPECT_EQ(test::read_file(tmp.file("file")), "x");
  // An empty directory of the user's is fine, and stays (it was not created here).
  fs::create_directories(tmp.file("empty"));
  try {
    io::OutputSet set(tmp.file("empty"), {"export-hf", "--out", false, ""});
    throw std::runtime_error("failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(fs::is_directory(tmp.file("empty")));
  EXPECT_TRUE(fs::is_empty(tmp.file("empty")));
}

TEST(OutputSet, ACutShortPublicationIsIncompleteForReaders) {
  TempDir tmp;
  const std::string d = tmp.file("out");
  fs::create_directories(d);
  test::write_file(d + "/.genemask.json",
                   R"({"format": "genemask-output", "format_version": 1, "command": "export-hf", "complete": false,
                       "entries": ["config.json"]})");
  test::write_file(d + "/config.json", "half");
  const std::string e = error_of([&] { io::check_output_complete(d); });
  EXPECT_NE(e.find("is an incomplete output of `genemask export-hf`"), std::string::npos) << e;
  {
    io::OutputSet set(d, {"export-hf", "--out", false, "config.json"});  // no --force needed
    test::write_file(set.staging() + "/config.json", "whole");
    set.publish();
  }
  EXPECT_EQ(test::read_file(d + "/config.json"), "whole");
  EXPECT_NO_THROW(io::check_output_complete(d));
  test::write_file(d + "/.genemask.json", R"({"entries": ["../../etc"]})");
  EXPECT_NE(error_of([&] { io::check_output_complete(d); }).find("is not a genemask output marker"), std::string::npos);
}

TEST(OutputSet, NeverRemovesAnEntryThatHoldsAnInput) {
  TempDir tmp;
  const std::string d = tmp.file("out");
  {
    io::OutputSet set(d, {"dataset promoter", "--out", false, ""});
    fs::create_directories(set.staging() + "/fewshot");
    test::write_file(set.staging() + "/fewshot/tss.bed", "x");
    set.publish();
  }
  const io::InputsInUse guard({{"--tss", d + "/fewshot/tss.bed"}});
  io::OutputSet set(d, {"dataset promoter", "--out", true, ""});
  test::write_file(set.staging() + "/train.tsv", "t");
  const std::string e = error_of([&] { set.publish(); });
  EXPECT_NE(e.find("it holds --tss " + d + "/fewshot/tss.bed"), std::string::npos) << e;
  EXPECT_EQ(test::read_file(d + "/fewshot/tss.bed"), "x");
}

TEST(ClaimRunDirectory, NewEmptyOwnOrLegacyOnly) {
  TempDir tmp;
  fs::create_directories(tmp.file("run"));
  io::claim_run_directory(tmp.file("run"), "pretrain", "--out", {"checkpoints"});
  EXPECT_EQ(marker(tmp.file("run"))["command"], "pretrain");
  EXPECT_NO_THROW(io::claim_run_directory(tmp.file("run"), "pretrain", "--out", {"checkpoints"}));
  EXPECT_NE(error_of([&] { io::claim_run_directory(tmp.file("run"), "sweep", "--out", {}); })
                .find("holds the output of `genemask pretrain`"),
            std::string::npos);
  fs::create_directories(tmp.file("legacy/checkpoints"));
  EXPECT_NO_THROW(io::claim_run_directory(tmp.file("legacy"), "pretrain", "--out", {"checkpoints"}));
  fs::create_directories(tmp.file("home"));
  test::write_file(tmp.file("home/thesis.tex"), "x");
  const std::string e = error_of([&] { io::claim_run_directory(tmp.file("home"), "pretrain", "--out", {"checkpoints"}); });
  EXPECT_NE(e.find("is not a `genemask pretrain` directory"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(tmp.file("home/.genemask.json")));
}

TEST(DirLock, OneHolderAndNoLockFileAfterwards) {
  TempDir tmp;
  {
    io::DirLock a(tmp.path(), "genemask finetune");
    EXPECT_TRUE(io::DirLock::held_by_another(tmp.path()));
    const std::string e = error_of([&] { io::DirLock b(tmp.path(), "genemask finetune"); });
    EXPECT_NE(e.find("is in use by another genemask finetune (host "), std::string::npos) << e;
    EXPECT_NE(e.find("pid " + std::to_string(::getpid())), std::string::npos) << e;
  }
  EXPECT_FALSE(fs::exists(tmp.file(".genemask.lock")));
  EXPECT_FALSE(io::DirLock::held_by_another(tmp.path()));
  io::DirLock again(tmp.path());
}

TEST(SignalCleanup, NamesTheProgramAfterTheCallersStringIsGone) {
  // mpirun ends the other ranks with SIGTERM while one may be running its static destructors
  // at exit: the handler must not read the caller's string then (it printed freed memory).
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    {
      std::string name = "genemask[rank 3]";
      io::install_signal_cleanup(name.c_str(), true);
      name.assign(name.size(), 'X');  // what a freed and reused buffer may hold
    }
    ::raise(SIGTERM);
    ::_exit(99);  // not reached: the handler ends the process with SIGTERM
  }
  ::close(fds[1]);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_EQ(got, "genemask[rank 3]: stopped by SIGTERM\n");
}

TEST(TempName, AnyLegalNameFits) {
  TempDir tmp;
  for (size_t len : {1, 100, 200, 230, 255}) {
    const std::string name(len, 'n');
    const std::string t = io::temp_name_for(tmp.file(name), ".probe");
    const std::string base = fs::path(t).filename().string();
    EXPECT_LE(base.size(), 255u) << len;
    EXPECT_NE(base.find(".tmp."), std::string::npos);
    io::AtomicFile f(tmp.file(name));
    f.stream() << "x";
    f.commit();
    EXPECT_EQ(test::read_file(tmp.file(name)), "x");
  }
  // Two long names that share their first 200 bytes get different temporaries.
  const std::string a = std::string(200, 'n') + std::string(50, 'a'), b = std::string(200, 'n') + std::string(50, 'b');
  EXPECT_NE(io::temp_name_for(a), io::temp_name_for(b));
}

// A killed writer's temporary: this host's is removed once its process is gone; another
// host's is named and left (whether its process runs cannot be told from here), as is a
// live one and another output's.
TEST(TempName, StaleTemporariesOfThisHostAreRemovedOtherHostsAreNamed) {
  TempDir tmp;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // a pid that no longer runs
  const std::string me = io::host_name(), dead = std::to_string(child), live = std::to_string(::getppid());
  const std::string mine_dead = "counts.h5.tmp." + me + "." + dead, mine_live = "counts.h5.tmp." + me + "." + live,
                    other = "counts.h5.tmp.node3.cluster.example." + dead, another = "npmi.tsv.tmp." + me + "." + dead;
  for (const auto& n : {mine_dead, mine_live, other, another}) std::ofstream(tmp.file(n)) << "partial";
  testing::internal::CaptureStderr();
  EXPECT_EQ(io::remove_stale_temporaries(tmp.file("counts.h5")), 1);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(fs::exists(tmp.file(mine_dead)));
  EXPECT_TRUE(fs::exists(tmp.file(mine_live)));
  EXPECT_TRUE(fs::exists(tmp.file(other)));
  EXPECT_TRUE(fs::exists(tmp.file(another)));
  EXPECT_NE(said.find("removed " + tmp.file(mine_dead) + ", an unfinished output of process " + dead), std::string::npos)
      << said;
  EXPECT_NE(said.find("note: " + tmp.file(other) + " is an unfinished output of process " + dead +
                      " on host node3.cluster.example; it was left alone"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find(mine_live), std::string::npos) << said;
}
