// The user's data (io/output_guard.hpp, io/atomic_file.hpp, io/dir_lock.hpp): outputs never
// over or inside inputs whatever the spelling, directories replaced only when genemask
// wrote them and --force says so, the marker last, one writer, names of any legal length.
#include "io/output_guard.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>
#include <nlohmann/json.hpp>

#include "io/atomic_file.hpp"
#include "io/dir_lock.hpp"
#include "io/error.hpp"
#include "io/file_outputs.hpp"
#include "io/h5.hpp"
#include "io/host_name.hpp"
#include "io/plain_names.hpp"
#include "io/table_text.hpp"
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

// One output inside another's directory: `finetune --out saved/metrics --save-model saved`
// made --out first, and --save-model then was "not empty" (a directory that did not exist).
TEST(CheckOutputs, AnOutputInsideAnotherOutputDirectoryIsRefused) {
  TempDir tmp;
  const auto check = [](const std::vector<io::NamedOutput>& outs) { return error_of([&] { io::check_outputs({}, outs); }); };
  const std::string saved = tmp.file("saved");
  for (const auto& outs :
       {std::vector<io::NamedOutput>{{"--out", saved + "/metrics", io::OutputKind::directory},
                                     {"--save-model", saved, io::OutputKind::directory}},
        std::vector<io::NamedOutput>{{"--save-model", saved, io::OutputKind::directory},
                                     {"--out", saved + "/./metrics/", io::OutputKind::directory}},
        std::vector<io::NamedOutput>{{"--save-model", saved + "/", io::OutputKind::directory},
                                     {"--filtered", saved + "/deep/f.tsv", io::OutputKind::file}}}) {
    const std::string e = check(outs);
    EXPECT_NE(e.find("lies inside --save-model " + saved), std::string::npos) << e;
    EXPECT_NE(e.find("another output of this command"), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(saved));
  }
  // Through a link to an existing directory too.
  fs::create_directories(tmp.file("real"));
  ASSERT_EQ(::symlink(tmp.file("real").c_str(), tmp.file("alias").c_str()), 0);
  EXPECT_NE(check({{"--out", tmp.file("real"), io::OutputKind::directory},
                   {"--save-model", tmp.file("alias") + "/m", io::OutputKind::directory}})
                .find("--save-model " + tmp.file("alias") + "/m lies inside --out " + tmp.file("real")),
            std::string::npos);
  // Side by side, a name that only begins like the other, and a file output "inside" a file
  // output's name: allowed.
  EXPECT_EQ(check({{"--out", saved, io::OutputKind::directory}, {"--save-model", saved + "-model", io::OutputKind::directory}}),
            "");
  EXPECT_EQ(check({{"--out", tmp.file("a"), io::OutputKind::directory}, {"--save-model", tmp.file("b"), io::OutputKind::directory}}),
            "");
}

// Two commands writing one name: `count --out x` ran long, `npmi --out x` wrote x meanwhile,
// and count's rename replaced npmi's finished table, both exiting 0. A file output is held to
// what it was when the command started.
TEST(CheckOutputs, AFileOutputWrittenByAnotherCommandMeanwhileIsNeverReplaced) {
  TempDir tmp;
  const auto write_out = [](const std::string& path, const std::string& text) {
    io::AtomicFile f(path);
    f.stream() << text;
    f.commit();
  };
  // Absent at the start, written by another meanwhile: refused, the other's file kept.
  const std::string a = tmp.file("a.tsv");
  io::check_outputs({}, {{"--out", a, io::OutputKind::file}});
  EXPECT_EQ(io::output_at_start(a), io::OutputAtStart::absent);
  test::write_file(a, "the other command's table\n");
  EXPECT_NE(error_of([&] { write_out(a, "mine\n"); }).find(a + " appeared while this command ran: another command "
                                                           "wrote it"),
            std::string::npos);
  EXPECT_EQ(test::read_file(a), "the other command's table\n");
  // Present at the start (an earlier output of its own), replaced by another file meanwhile:
  // refused; left as it is: written over.
  const std::string b = tmp.file("b.tsv");
  test::write_file(b, "earlier\n");
  io::check_outputs({}, {{"--out", b, io::OutputKind::file}});
  EXPECT_EQ(io::output_at_start(b), io::OutputAtStart::present);
  test::write_file(tmp.file("other.tsv"), "the other command's table\n");
  fs::rename(tmp.file("other.tsv"), b);
  EXPECT_NE(error_of([&] { write_out(b, "mine\n"); }).find(b + " was replaced while this command ran"), std::string::npos);
  EXPECT_EQ(test::read_file(b), "the other command's table\n");
  fs::remove(b);
  EXPECT_NE(error_of([&] { write_out(b, "mine\n"); }).find(b + " was removed while this command ran"), std::string::npos);
  // Undisturbed: written, and again (the file there is now its own); no temporary left.
  const std::string c = tmp.file("c.tsv");
  io::check_outputs({}, {{"--out", c, io::OutputKind::file}});
  write_out(c, "one\n");
  write_out(c, "two\n");
  EXPECT_EQ(test::read_file(c), "two\n");
  EXPECT_EQ(io::output_at_start(tmp.file("not-an-output.tsv")), io::OutputAtStart::unknown);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 2u);  // a.tsv, c.tsv
  // Another writer's rename between the check and this one's rename: the exchange finds it
  // displaced, puts it back and refuses (both had exited 0, one's result silently gone).
  const std::string d = tmp.file("d.tsv");
  test::write_file(d, "earlier\n");
  io::check_outputs({}, {{"--out", d, io::OutputKind::file}});
  ::setenv("GENEMASK_TEST_HOLD_RENAME", "400", 1);
  std::thread other([&] {
    ::usleep(150 * 1000);
    test::write_file(tmp.file("other-d.tsv"), "the other command's table\n");
    fs::rename(tmp.file("other-d.tsv"), d);
  });
  const std::string raced = error_of([&] { write_out(d, "mine\n"); });
  other.join();
  ::unsetenv("GENEMASK_TEST_HOLD_RENAME");
  EXPECT_NE(raced.find(d + " was replaced while this command ran"), std::string::npos) << raced;
  EXPECT_EQ(test::read_file(d), "the other command's table\n");
  fs::remove(d);
  // The rename itself never replaces a file that appears in the last instant.
  test::write_file(tmp.file("t"), "x");
  test::write_file(tmp.file("u"), "y");
  EXPECT_NE(error_of([&] { io::rename_no_replace_or_throw(tmp.file("t"), tmp.file("u")); }).find("appeared"),
            std::string::npos);
  EXPECT_EQ(test::read_file(tmp.file("u")), "y");
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
  // A link to nothing was refused only at the end, as "appeared while this command ran".
  fs::create_symlink(tmp.file("nowhere/new.tsv"), tmp.file("dangling"));
  for (const auto kind : {io::OutputKind::file, io::OutputKind::directory})
    EXPECT_EQ(error_of([&] { io::check_outputs({}, {{"--out", tmp.file("dangling"), kind}}); }),
              "--out " + tmp.file("dangling") + " is a symbolic link to nothing (" + tmp.file("nowhere/new.tsv") +
                  "): remove the link, or give another name");
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

// A command with two outputs (finetune --out and --save-model) prepares both before it
// publishes either: a failure in the second's preparation (a file in its way, a full disk
// when its files are synced) publishes neither.
TEST(OutputSet, TwoOutputsPreparedFirstPublishNeitherWhenTheSecondFails) {
  TempDir tmp;
  const std::string model = tmp.file("model"), out = tmp.file("out");
  try {
    io::OutputSet m(model, {"finetune --save-model", "--save-model", false, "config.json", true});
    io::OutputSet o(out, {"finetune", "--out", false, "metrics.json"});
    test::write_file(m.staging() + "/config.json", "{}");
    test::write_file(o.staging() + "/metrics.json", "{}");
    test::write_file(out + "/metrics.json", "mine");  // put there while the command ran
    m.prepare();
    o.prepare();
    m.publish();
    o.publish();
    ADD_FAILURE() << "published over a file in the way";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is in the way"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(model));  // made by the command, never published: gone
  EXPECT_EQ(test::read_file(out + "/metrics.json"), "mine");
  EXPECT_EQ(names(out), (std::vector<std::string>{"metrics.json"}));
}

TEST(OutputSet, AFailureNeverRemovesWhatAnotherPutInTheDirectoryItMade) {
  TempDir tmp;
  // A file the user put in the new DIR while the command ran: it stays, and DIR with it;
  // what the command made (staging, lock) goes.
  const std::string d = tmp.file("new/out");
  try {
    io::OutputSet set(d, {"overlap", "--out", false, "summary.json"});
    test::write_file(set.staging() + "/summary.json", "{}");
    test::write_file(d + "/notes.txt", "mine");
    throw std::runtime_error("the command failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(names(d), (std::vector<std::string>{"notes.txt"}));
  EXPECT_EQ(test::read_file(d + "/notes.txt"), "mine");
  // So another run's output, made in the DIR this one created before it took the lock (a
  // run stalled between its mkdir and its lock), keeps DIR when this run is refused or fails.
  // A user's file where an output goes: refused "in the way", and kept (it was removed with
  // the DIR the command had made, in the step that told the user to move it away).
  const std::string w = tmp.file("way");
  const std::string err = error_of([&] {
    io::OutputSet set(w, {"overlap", "--out", false, "summary.json"});
    test::write_file(set.staging() + "/summary.json", "{}");
    test::write_file(w + "/summary.json", "mine");
    set.publish();
  });
  EXPECT_NE(err.find("is in the way"), std::string::npos) << err;
  EXPECT_EQ(names(w), (std::vector<std::string>{"summary.json"}));
  EXPECT_EQ(test::read_file(w + "/summary.json"), "mine");
}

TEST(OutputSet, AMarkerTemporaryOfAKilledRunIsNotTheUsers) {
  TempDir tmp;
  const std::string d = tmp.file("out");
  fs::create_directories(d);
  // What a run killed while writing DIR's first marker leaves: DIR is still empty to genemask.
  const std::string stale = d + "/.genemask.json.tmp." + io::host_name() + ".999999999";
  test::write_file(stale, "{");
  {
    io::OutputSet set(d, {"overlap", "--out", false, "summary.json"});
    test::write_file(set.staging() + "/summary.json", "{}");
    set.publish();
  }
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_EQ(names(d), (std::vector<std::string>{".genemask.json", "summary.json"}));
  // The same for a run directory (pretrain, sweep).
  const std::string r = tmp.file("run");
  fs::create_directories(r);
  test::write_file(r + "/.genemask.json.tmp." + io::host_name() + ".999999999", "{");
  EXPECT_NO_THROW(io::claim_run_directory(r, "pretrain", "--out", {}, nullptr));
  EXPECT_EQ(names(r), (std::vector<std::string>{".genemask.json"}));
}

TEST(OutputDir, AFailureRemovesOnlyWhatTheCommandWrote) {
  TempDir tmp;
  const std::string d = tmp.file("made/run");
  try {
    io::OutputDir out(d, {"metrics.jsonl", "checkpoints"});
    test::write_file(d + "/metrics.jsonl", "{}\n");
    fs::create_directories(d + "/checkpoints/step-1");
    throw std::runtime_error("failed before the first checkpoint");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fs::exists(tmp.file("made")));  // all its own: DIR and the parent made for it go
  try {
    io::OutputDir out(d, {"metrics.jsonl", "checkpoints"});
    test::write_file(d + "/metrics.jsonl", "{}\n");
    test::write_file(d + "/monitor.log", "the user's");
    throw std::runtime_error("failed before the first checkpoint");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(names(d), (std::vector<std::string>{"monitor.log"}));  // theirs stays, and DIR with it
  // Another run's output made between this one's mkdir and its lock: locked() keeps DIR.
  const std::string e = tmp.file("raced");
  try {
    io::OutputDir out(e, {"metrics.jsonl", "checkpoints"});
    test::write_file(e + "/metrics.jsonl", "the other run's\n");
    fs::create_directories(e + "/checkpoints/step-40");
    out.locked();
    throw std::runtime_error("already holds checkpoints");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(test::read_file(e + "/metrics.jsonl"), "the other run's\n");
  EXPECT_TRUE(fs::exists(e + "/checkpoints/step-40"));
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

// Regression: --force removed a directory entry whole (fewshot/), with the notes and folders
// the user had put inside it. The marker's tree lists what genemask wrote in each; a path it
// does not list stops the replacement before the work, and nothing is removed.
TEST(OutputSet, ReplacingADirectoryEntryKeepsTheUsersFilesInside) {
  TempDir tmp;
  const std::string d = tmp.file("out");
  const auto write = [&](const std::string& split) {
    io::OutputSet set(d, {"dataset splice", "--out", true, "summary.json"});
    fs::create_directories(set.staging() + "/fewshot/" + split);
    test::write_file(set.staging() + "/fewshot/" + split + "/train.tsv", split);
    test::write_file(set.staging() + "/summary.json", "{}");
    set.publish();
  };
  write("10");
  EXPECT_EQ(marker(d)["tree"]["fewshot"], nlohmann::json::array({"10", "10/train.tsv"}));
  for (const std::string mine : {"fewshot/notes.txt", "fewshot/1000/train.tsv", "fewshot/10/mine.tsv"}) {
    fs::create_directories(fs::path(d + "/" + mine).parent_path());
    test::write_file(d + "/" + mine, "the user's");
    const std::string e = error_of([&] { write("20"); });
    EXPECT_NE(e.find("is not genemask's"), std::string::npos) << e;
    EXPECT_EQ(test::read_file(d + "/" + mine), "the user's");
    EXPECT_EQ(test::read_file(d + "/fewshot/10/train.tsv"), "10");
    fs::remove(d + "/" + mine);
    if (mine == "fewshot/1000/train.tsv") fs::remove(d + "/fewshot/1000");
  }
  write("20");  // only genemask's files: replaced
  EXPECT_FALSE(fs::exists(d + "/fewshot/10"));
  EXPECT_EQ(test::read_file(d + "/fewshot/20/train.tsv"), "20");
  // A marker of before the trees: the old directory is held against the new output's tree.
  auto m = marker(d);
  m.erase("tree");
  test::write_file(d + "/.genemask.json", m.dump());
  test::write_file(d + "/fewshot/20/notes.txt", "the user's");
  EXPECT_EQ(error_of([&] { write("20"); }),
            d + "/fewshot/20/notes.txt may not be genemask's (.genemask.json, written by an earlier genemask, does "
                "not list what it wrote in " + d + "/fewshot, and this command does not write it), so " + d +
                "/fewshot is not replaced; move it out and run the command again");
  EXPECT_EQ(test::read_file(d + "/fewshot/20/notes.txt"), "the user's");
  fs::remove(d + "/fewshot/20/notes.txt");
  write("20");
  EXPECT_EQ(test::read_file(d + "/fewshot/20/train.tsv"), "20");
}

// Regression: `shards --force` replaced a shard set while a pretrain read it; the run's next
// evaluation read the new set's validation split, silently. Readers share the set's lock; a
// replacement needs it alone, and each side refuses while the other holds it.
TEST(OutputSet, AReplacementAndAReaderExcludeEachOther) {
  TempDir tmp;
  const std::string d = tmp.file("shards");
  const auto write = [&](const std::string& text) {
    io::OutputSet set(d, {"shards", "--out", true, "manifest.json", false, /*readers_lock=*/true});
    test::write_file(set.staging() + "/manifest.json", text);
    set.publish();
  };
  EXPECT_EQ(io::hold_output_for_reading(d, "--shards " + d), nullptr);  // nothing there yet
  write("one");
  EXPECT_TRUE(fs::exists(d + "/" + io::kReadersLock));
  EXPECT_EQ(marker(d)["entries"], nlohmann::json::array({"manifest.json"}));
  {
    const auto hold = io::hold_output_for_reading(d, "--shards " + d);
    ASSERT_NE(hold, nullptr);
    const auto again = io::hold_output_for_reading(d, "--shards " + d);  // readers share it
    EXPECT_NE(again, nullptr);
    const std::string e = error_of([&] { write("two"); });
    EXPECT_NE(e.find("--out " + d + " is being read by another genemask command"), std::string::npos) << e;
    EXPECT_EQ(test::read_file(d + "/manifest.json"), "one");
  }
  {
    io::OutputSet set(d, {"shards", "--out", true, "manifest.json", false, true});
    const std::string e = error_of([&] { io::hold_output_for_reading(d, "--shards " + d); });
    EXPECT_NE(e.find("--shards " + d + " is being replaced by another genemask command"), std::string::npos) << e;
    test::write_file(set.staging() + "/manifest.json", "two");
    set.publish();
  }
  EXPECT_NE(io::hold_output_for_reading(d, "--shards " + d), nullptr);
  EXPECT_EQ(test::read_file(d + "/manifest.json"), "two");
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
  // "complete" given twice (an edit that added the key again): not read as its last value.
  test::write_file(d + "/.genemask.json",
                   R"({"format": "genemask-output", "format_version": 1, "command": "export-hf", "complete": false,
                       "complete": true, "entries": ["config.json"]})");
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
  const auto has_checkpoint = [](const std::string& d) { return fs::exists(d + "/checkpoints/step-1"); };
  const std::vector<std::string> own = {"checkpoints", "metrics.jsonl"};
  fs::create_directories(tmp.file("run"));
  io::claim_run_directory(tmp.file("run"), "pretrain", "--out", own, has_checkpoint);
  EXPECT_EQ(marker(tmp.file("run"))["command"], "pretrain");
  EXPECT_NO_THROW(io::claim_run_directory(tmp.file("run"), "pretrain", "--out", own, has_checkpoint));
  EXPECT_NE(error_of([&] { io::claim_run_directory(tmp.file("run"), "sweep", "--out", {}, nullptr); })
                .find("holds the output of `genemask pretrain`"),
            std::string::npos);
  // A run of before the markers: the command's own entries and the proof.
  fs::create_directories(tmp.file("legacy/checkpoints/step-1"));
  test::write_file(tmp.file("legacy/metrics.jsonl"), "{}\n");
  EXPECT_NO_THROW(io::claim_run_directory(tmp.file("legacy"), "pretrain", "--out", own, has_checkpoint));
  EXPECT_EQ(marker(tmp.file("legacy"))["command"], "pretrain");
  // Regression: a user's folder holding a file named metrics.jsonl (beside others, or alone
  // without a checkpoint) was taken for an old run, and its metrics.jsonl written over.
  for (const std::string name : {"home", "log-only", "empty-checkpoints"}) {
    fs::create_directories(tmp.file(name));
    if (name == "home") test::write_file(tmp.file(name + "/thesis.tex"), "x");
    if (name != "empty-checkpoints") test::write_file(tmp.file(name + "/metrics.jsonl"), "{\"epoch\": 1}\n");
    if (name == "empty-checkpoints") fs::create_directories(tmp.file(name + "/checkpoints"));
    const std::string e = error_of([&] { io::claim_run_directory(tmp.file(name), "pretrain", "--out", own, has_checkpoint); });
    EXPECT_NE(e.find("is not a `genemask pretrain` directory"), std::string::npos) << name << ": " << e;
    EXPECT_FALSE(fs::exists(tmp.file(name + "/.genemask.json"))) << name;
  }
  EXPECT_EQ(test::read_file(tmp.file("log-only/metrics.jsonl")), "{\"epoch\": 1}\n");
}

// Regression: a sweep continued in a `cp -al` snapshot appended to the original's
// results.jsonl (one inode under two names), and a metrics.jsonl that was a link was written
// through. The name becomes a file of its own; the other name keeps its bytes.
TEST(OwnAppendFile, HardLinksAndSymlinksAreCopiedNotWrittenThrough) {
  TempDir tmp;
  test::write_file(tmp.file("a.jsonl"), "one\n");
  fs::create_hard_link(tmp.file("a.jsonl"), tmp.file("b.jsonl"));
  io::own_append_file(tmp.file("b.jsonl"));
  EXPECT_EQ(fs::hard_link_count(tmp.file("a.jsonl")), 1u);
  EXPECT_EQ(fs::hard_link_count(tmp.file("b.jsonl")), 1u);
  { std::ofstream(tmp.file("b.jsonl"), std::ios::app) << "two\n"; }
  EXPECT_EQ(test::read_file(tmp.file("a.jsonl")), "one\n");
  EXPECT_EQ(test::read_file(tmp.file("b.jsonl")), "one\ntwo\n");
  fs::create_symlink(tmp.file("a.jsonl"), tmp.file("c.jsonl"));
  io::own_append_file(tmp.file("c.jsonl"));
  EXPECT_FALSE(fs::is_symlink(tmp.file("c.jsonl")));
  EXPECT_EQ(test::read_file(tmp.file("c.jsonl")), "one\n");
  fs::create_symlink(tmp.file("nowhere"), tmp.file("d.jsonl"));
  EXPECT_NE(error_of([&] { io::own_append_file(tmp.file("d.jsonl")); }).find("a symbolic link to no regular file"),
            std::string::npos);
  io::own_append_file(tmp.file("missing.jsonl"));  // none yet: nothing to do
  EXPECT_FALSE(fs::exists(tmp.file("missing.jsonl")));
  io::own_append_file(tmp.file("a.jsonl"));  // a file of one name is left as it is
  EXPECT_EQ(test::read_file(tmp.file("a.jsonl")), "one\n");
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

namespace {
/// Forks; the child runs `body` (which installs the signal cleanup and makes what it
/// makes), then raises SIGTERM. The child's stderr comes back, and "[not ended by SIGTERM]"
/// when the child did not end by the signal.
std::string stderr_of_a_stopped_child(const std::function<void()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    body();
    ::raise(SIGTERM);
    ::_exit(99);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) got += "[not ended by SIGTERM]";
  return got;
}
}  // namespace

TEST(SignalCleanup, NamesTheProgramAfterTheCallersStringIsGone) {
  // mpirun ends the other ranks with SIGTERM while one may be running its static destructors
  // at exit: the handler must not read the caller's string then (it printed freed memory).
  const std::string got = stderr_of_a_stopped_child([] {
    std::string name = "genemask[rank 3]";
    io::install_signal_cleanup(name.c_str(), true);
    name.assign(name.size(), 'X');  // what a freed and reused buffer may hold
  });
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

// The host name without allocating (the MPI watch's form) against gethostname itself: whole
// in a large buffer, cut (and terminated) in a short one, nothing written into none.
TEST(HostName, IntoABufferIsGethostnamesNameCutToFit) {
  char expect[256] = {};
  ASSERT_EQ(::gethostname(expect, sizeof expect - 1), 0);
  ASSERT_NE(expect[0], '\0');
  EXPECT_EQ(io::host_name(), expect);
  char buf[256];
  std::memset(buf, 'x', sizeof buf);
  io::host_name_into(buf, sizeof buf);
  EXPECT_STREQ(buf, expect);
  const std::string name = expect;
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{4}, name.size(), name.size() + 1}) {
    std::memset(buf, 'x', sizeof buf);
    io::host_name_into(buf, n);
    EXPECT_EQ(std::string(buf), name.substr(0, n - 1)) << n;
    EXPECT_EQ(buf[n], 'x') << "wrote past " << n;
  }
  buf[0] = 'x';
  io::host_name_into(buf, 0);
  EXPECT_EQ(buf[0], 'x');
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

// ---- issue 31: single-file outputs, managed directories, signals -----------------------

namespace {
io::NamedOutput file_out(const std::string& path, io::OwnFile own, bool force = false) {
  io::NamedOutput o{"--out", path, io::OutputKind::file, std::move(own)};
  o.force = force;
  o.has_force = true;
  return o;
}
}  // namespace

TEST(FileOutputs, AnExistingFileIsReplacedOnlyWhenItIsOwnOrForced) {
  TempDir tmp;
  const io::OwnFile npmi{io::OwnFile::Kind::first_line, "rank\tkmer", "an npmi.tsv"};
  test::write_file(tmp.file("genome.fa"), ">chr1\nACGT\n");
  test::write_file(tmp.file("npmi.tsv"), "rank\tkmer\n1\tAAAAAA\n");
  EXPECT_NO_THROW(io::check_replaceable_outputs({file_out(tmp.file("new.tsv"), npmi)}, "npmi"));  // not there
  EXPECT_NO_THROW(io::check_replaceable_outputs({file_out(tmp.file("npmi.tsv"), npmi)}, "npmi"));  // its own
  EXPECT_EQ(error_of([&] { io::check_replaceable_outputs({file_out(tmp.file("genome.fa"), npmi)}, "npmi"); }),
            "--out " + tmp.file("genome.fa") + " exists and is not an earlier output of `genemask npmi` (it is not an "
            "npmi.tsv): genemask replaces a file only when it is its own earlier output; pass --force to replace it, "
            "or choose another --out");
  EXPECT_NO_THROW(io::check_replaceable_outputs({file_out(tmp.file("genome.fa"), npmi, /*force=*/true)}, "npmi"));
  auto no_force = file_out(tmp.file("genome.fa"), {}, false);
  no_force.has_force = false;
  EXPECT_NE(error_of([&] { io::check_replaceable_outputs({no_force}, "pretrain"); }).find("remove it yourself"),
            std::string::npos);
  // A prefix rule, and a first line that only starts like the header.
  const io::OwnFile pred{io::OwnFile::Kind::first_line_prefix, "id\twindows\tprob_", "predictions"};
  test::write_file(tmp.file("p.tsv"), "id\twindows\tprob_0\tprob_1\tpredicted\n");
  EXPECT_TRUE(io::is_own_output(tmp.file("p.tsv"), pred));
  EXPECT_FALSE(io::is_own_output(tmp.file("npmi.tsv"), pred));
  EXPECT_FALSE(io::is_own_output(tmp.file("npmi.tsv"), io::OwnFile{io::OwnFile::Kind::first_line, "rank", ""}));
}

TEST(FileOutputs, HdfAndSafetensorsAreRecognisedByTheirFormat) {
  TempDir tmp;
  {
    io::h5::Handle f = io::h5::create_file(tmp.file("c.h5"));
    io::h5::set_attr(f, "format", std::string("genemask-counts"));
    io::h5::close_file(f);
  }
  {
    io::h5::Handle f = io::h5::create_file(tmp.file("other.h5"));
    io::h5::set_attr(f, "format", std::string("someone-elses"));
    io::h5::close_file(f);
  }
  const io::OwnFile counts{io::OwnFile::Kind::hdf5_format, "genemask-counts", "a counts file"};
  EXPECT_TRUE(io::is_own_output(tmp.file("c.h5"), counts));
  EXPECT_FALSE(io::is_own_output(tmp.file("other.h5"), counts));
  test::write_file(tmp.file("text.h5"), "not HDF5 at all");
  EXPECT_FALSE(io::is_own_output(tmp.file("text.h5"), counts));
  // safetensors: 8-byte little-endian header length, then the JSON header.
  const auto st = [&](const std::string& name, const std::string& header) {
    std::string b(8, '\0');
    for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    test::write_file(tmp.file(name), b + header);
  };
  st("dump.safetensors", R"({"__metadata__":{"format":"pt","genemask":"first-batch"}})");
  st("model.safetensors", R"({"__metadata__":{"format":"pt"}})");
  const io::OwnFile dump{io::OwnFile::Kind::safetensors_metadata, "first-batch", "a dumped batch"};
  EXPECT_TRUE(io::is_own_output(tmp.file("dump.safetensors"), dump));
  EXPECT_FALSE(io::is_own_output(tmp.file("model.safetensors"), dump));
}

TEST(FileOutputs, NothingIsWrittenInsideADirectoryGenemaskManages) {
  TempDir tmp;
  {
    io::OutputSet set(tmp.file("export"), {"export-hf", "--out", false, "config.json"});
    test::write_file(set.staging() + "/config.json", "{}");
    set.publish();
  }
  fs::create_directories(tmp.file("shards"));
  test::write_file(tmp.file("shards/manifest.json"), R"({"format": "genemask-shards"})");
  fs::create_directories(tmp.file("run/checkpoints/step-00000010"));
  test::write_file(tmp.file("run/checkpoints/step-00000010/state.json"), "{}");
  fs::create_directories(tmp.file("mine/sub"));
  const io::OwnFile any{io::OwnFile::Kind::none, "", ""};
  for (const std::string& inside : {tmp.file("export/config.json"), tmp.file("export/new/dir/x.h5"),
                                    tmp.file("shards/manifest.json"), tmp.file("run/checkpoints/step-00000010/m.bin")}) {
    const std::string e = error_of([&] { io::check_replaceable_outputs({file_out(inside, any, true)}, "npmi"); });
    EXPECT_NE(e.find("lies inside"), std::string::npos) << inside << ": " << e;
    EXPECT_NE(e.find("--force or not"), std::string::npos) << e;
  }
  EXPECT_NE(io::managed_directory_above(tmp.file("export/x"))->find("`genemask export-hf`"), std::string::npos);
  EXPECT_NE(io::managed_directory_above(tmp.file("shards/a/b"))->find("shard set"), std::string::npos);
  EXPECT_FALSE(io::managed_directory_above(tmp.file("mine/sub/x.tsv")));
  // A directory output is the managed directory itself: that is OutputSet's to judge.
  EXPECT_FALSE(io::managed_directory_above(tmp.file("export")));
}


TEST(SignalCleanup, ASignalRemovesTheUnfinishedDirectoriesAndLocks) {
  TempDir tmp;
  // A new DIR (and the parent made for it) with staged files in subdirectories and a lock.
  const std::string dir = tmp.file("made/out");
  const std::string got = stderr_of_a_stopped_child([&] {
    io::install_signal_cleanup("genemask", true);
    static std::unique_ptr<io::OutputSet> set;  // never destroyed: the signal comes first
    set = std::make_unique<io::OutputSet>(dir, io::OutputSet::Options{"export-hf", "--out", false, "config.json"});
    fs::create_directories(set->staging() + "/a/b/c");
    for (int i = 0; i < 300; ++i) test::write_file(set->staging() + "/a/b/c/f" + std::to_string(i), "x");
    test::write_file(set->staging() + "/model.safetensors", std::string(1 << 20, 'w'));
    fs::create_symlink("/etc", set->staging() + "/link");  // removed, never followed
  });
  EXPECT_FALSE(fs::exists(dir)) << got;
  EXPECT_FALSE(fs::exists(tmp.file("made"))) << got;
  EXPECT_TRUE(fs::exists("/etc/hostname") || fs::exists("/etc"));
  EXPECT_EQ(got, "genemask: stopped by SIGTERM; removed the unfinished " + dir + "\n");
  // A DIR that was there: it stays, empty again; only the staging directory and the lock go.
  fs::create_directories(tmp.file("there"));
  const std::string got2 = stderr_of_a_stopped_child([&] {
    io::install_signal_cleanup("genemask", true);
    static std::unique_ptr<io::OutputSet> set;
    set = std::make_unique<io::OutputSet>(tmp.file("there"), io::OutputSet::Options{"export-hf", "--out", false, "config.json"});
    test::write_file(set->staging() + "/config.json", "{}");
  });
  EXPECT_TRUE(fs::is_directory(tmp.file("there")));
  EXPECT_TRUE(fs::is_empty(tmp.file("there"))) << got2;
  EXPECT_EQ(got2, "genemask: stopped by SIGTERM; removed the unfinished " + tmp.file("there/.genemask-staging") + "\n");
  // An OutputDir made and not kept goes; one kept stays.
  const std::string got3 = stderr_of_a_stopped_child([&] {
    io::install_signal_cleanup("genemask", true);
    static std::unique_ptr<io::OutputDir> a, b, c;
    a = std::make_unique<io::OutputDir>(tmp.file("run-a"), std::vector<std::string>{"checkpoint"});
    b = std::make_unique<io::OutputDir>(tmp.file("run-b"), std::vector<std::string>{"checkpoint"});
    c = std::make_unique<io::OutputDir>(tmp.file("run-c"), std::vector<std::string>{"checkpoint"});
    test::write_file(tmp.file("run-a/checkpoint"), "x");
    test::write_file(tmp.file("run-b/checkpoint"), "x");
    b->keep();
    test::write_file(tmp.file("run-c/checkpoint"), "x");
    test::write_file(tmp.file("run-c/notes.txt"), "the user's");
  });
  EXPECT_FALSE(fs::exists(tmp.file("run-a"))) << got3;
  EXPECT_TRUE(fs::exists(tmp.file("run-b/checkpoint"))) << got3;
  EXPECT_FALSE(fs::exists(tmp.file("run-c/checkpoint"))) << got3;  // its own goes; the user's file stays
  EXPECT_EQ(names(tmp.file("run-c")), (std::vector<std::string>{"notes.txt"})) << got3;
  EXPECT_EQ(got3, "genemask: stopped by SIGTERM; removed the unfinished " + tmp.file("run-a") + "\n");
  // A new OutputSet DIR that someone put a file in meanwhile: staging and lock go, DIR stays.
  const std::string got4 = stderr_of_a_stopped_child([&] {
    io::install_signal_cleanup("genemask", true);
    static std::unique_ptr<io::OutputSet> set;
    set = std::make_unique<io::OutputSet>(tmp.file("new4"), io::OutputSet::Options{"export-hf", "--out", false, "config.json"});
    test::write_file(set->staging() + "/config.json", "{}");
    test::write_file(tmp.file("new4/notes.txt"), "the user's");
  });
  EXPECT_EQ(names(tmp.file("new4")), (std::vector<std::string>{"notes.txt"})) << got4;
}

TEST(SignalCleanup, ASignalDuringAFailedOutputsRemovalFinishesIt) {
  // A rank whose write failed removes its unfinished output while the other ranks, which lose
  // the staging directory they write into, abort the job: mpirun's SIGTERM then comes in the
  // middle of the removal. The signal cleanup stays registered until the removal is done
  // (before, it was dropped first, and such a signal left DIR behind: a CI run of shards).
  TempDir tmp;
  ::setenv("GENEMASK_TEST_HOLD_CLEANUP", "5000", 1);  // between the staging directory and DIR
  const auto signal_soon = [] {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(::getpid(), SIGTERM);
    }).detach();
  };
  const std::string dir = tmp.file("made/out");
  const std::string got = stderr_of_a_stopped_child([&] {
    io::install_signal_cleanup("genemask", true);
    auto set = std::make_unique<io::OutputSet>(dir, io::OutputSet::Options{"shards", "--out", false, "manifest.json"});
    test::write_file(set->staging() + "/train-r00001-00000.h5", "x");
    signal_soon();
    set.reset();  // never published: removed, and the signal comes during the pause
  });
  EXPECT_FALSE(fs::exists(tmp.file("made"))) << got;
  EXPECT_EQ(got, "genemask: stopped by SIGTERM; removed the unfinished " + dir + "\n");
  // The same for an OutputDir removed by an exception.
  const std::string run = tmp.file("run");
  const std::string got2 = stderr_of_a_stopped_child([&] {
    io::install_signal_cleanup("genemask", true);
    try {
      io::OutputDir out(run, std::vector<std::string>{"checkpoint"});
      test::write_file(run + "/checkpoint", "x");
      signal_soon();
      throw std::runtime_error("the command failed");
    } catch (const std::exception&) {
    }
  });
  EXPECT_FALSE(fs::exists(run)) << got2;
  EXPECT_EQ(got2, "genemask: stopped by SIGTERM; removed the unfinished " + run + "\n");
  ::unsetenv("GENEMASK_TEST_HOLD_CLEANUP");
}

namespace {
/// Makes empty files DIR/w0, w1, ... in a thread of its own until one cannot be made (DIR is
/// gone: `refused`) or until stopped.
struct EndlessWriter {
  std::atomic<bool> stop{false}, refused{false};
  std::atomic<int> made{0};
  std::thread thread;
  explicit EndlessWriter(const std::string& dir) {
    thread = std::thread([this, dir] {
      for (int i = 0; !stop; ++i) {
        const int fd = ::open((dir + "/w" + std::to_string(i)).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
          refused = true;
          return;
        }
        ::close(fd);
        ++made;
      }
    });
    while (made == 0 && !refused) std::this_thread::yield();
  }
  /// Waits up to `ms` for the writer to be refused, then stops it.
  void end(int ms = 0) {
    for (int i = 0; i < ms && !refused; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop = true;
    thread.join();
  }
};
}  // namespace

TEST(OutputSet, AFailedSetIsRemovedWhileAnotherRankStillWritesIntoIt) {
  // Rank 0's write failed and its set is destroyed while another rank still writes its shard
  // files into the staging directory: DIR goes all the same (before, the removal chased the
  // writer, or the writer's file made after the last pass kept the staging directory and DIR:
  // a CI run of shards), and the writer's next file cannot be made, so that rank aborts.
  TempDir tmp;
  for (int attempt = 0; attempt < 200; ++attempt) {  // a race: each attempt is one try
    const std::string dir = tmp.file("made/out" + std::to_string(attempt));
    auto set = std::make_unique<io::OutputSet>(dir, io::OutputSet::Options{"shards", "--out", false, "manifest.json"});
    for (int i = 0; i < 100; ++i) test::write_file(set->staging() + "/train-r00000-" + std::to_string(i) + ".h5", "x");
    EndlessWriter writer(set->staging());
    set.reset();
    writer.end(2000);
    EXPECT_TRUE(writer.refused) << attempt;
    EXPECT_FALSE(fs::exists(dir)) << attempt << ": " << writer.made << " files written";
  }
  EXPECT_FALSE(fs::exists(tmp.file("made")));
}

TEST(RemoveTree, AWriterThatNeverStopsCannotHoldItForever) {
  // The removal reads a directory again until a pass removes nothing: a writer that keeps
  // adding entries (another thread while a signal's cleanup runs) would hold it forever.
  TempDir tmp;
  const std::string dir = tmp.file("busy");
  fs::create_directories(dir);
  EndlessWriter writer(dir);
  io::remove_tree(dir);  // returns (the directory may stay: the writer refills it)
  writer.end();
  EXPECT_TRUE(io::remove_tree(dir));
  EXPECT_FALSE(fs::exists(dir));
}

TEST(InputChecks, PipesDevicesAndLoopsAreNamedWithoutOpeningThem) {
  TempDir tmp;
  ASSERT_EQ(::mkfifo(tmp.file("fifo").c_str(), 0644), 0);
  fs::create_symlink(tmp.file("loop"), tmp.file("loop"));
  fs::create_symlink(tmp.file("nowhere"), tmp.file("dangling"));
  test::write_file(tmp.file("f"), "x");
  EXPECT_NE(io::input_problem(tmp.file("fifo")).find("is a FIFO (a named pipe, or a process substitution"),
            std::string::npos);
  EXPECT_NE(io::input_problem("/dev/null").find("is a character device, not a regular file"), std::string::npos);
  EXPECT_NE(io::input_problem(tmp.file("loop")).find("too many levels of symbolic links"), std::string::npos);
  EXPECT_EQ(io::input_problem(tmp.file("dangling")), "is a symbolic link to a file that does not exist");
  EXPECT_EQ(io::input_problem(tmp.file("none")), "does not exist");
  EXPECT_EQ(io::input_problem(tmp.path()), "is a directory, not a file");
  EXPECT_EQ(io::input_problem(tmp.file("f"), io::InputKind::directory), "is a file, not a directory");
  EXPECT_EQ(io::input_problem(tmp.file("f")), "");
  EXPECT_EQ(io::input_type_problem(tmp.file("none")), "");  // left to the opener
}

TEST(Utf8Escaped, KeepsValidTextAndEscapesTheRest) {
  EXPECT_EQ(io::utf8_escaped("chr1"), "chr1");
  EXPECT_EQ(io::utf8_escaped("seq\xff" "1"), "seq\\xff1");
  EXPECT_EQ(io::utf8_escaped(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(io::utf8_escaped("na\xc3\xafve\ttab"), "na\xc3\xafve\ttab");  // UTF-8 and a tab kept
  EXPECT_EQ(io::utf8_escaped("\xc3"), "\\xc3");  // a sequence cut short
}

TEST(TableText, FieldsComeBackWholeInTsvAndCsv) {
  EXPECT_EQ(io::tsv_field("a,b"), "a,b");  // a comma is no separator of a TSV
  EXPECT_EQ(io::csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(io::tsv_field("c\td"), "\"c\td\"");
  EXPECT_EQ(io::tsv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(io::tsv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(io::tsv_field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(io::tsv_field("latin\xff"), "latin\\xff");
}

// The names a marker, a checkpoint's state.json or a shard manifest records of other files:
// each must stay inside its directory, whatever an edit put there.
TEST(PlainNames, NamesAndRelativePathsStayInsideTheirDirectory) {
  for (const char* ok : {"a", "model.safetensors", "...", ".hidden", "a b"}) {
    EXPECT_TRUE(io::is_plain_name(ok)) << ok;
    EXPECT_TRUE(io::is_plain_relative_path(ok)) << ok;
  }
  for (const char* bad : {"", ".", "..", "a/b", "/a", "a/", "/"}) EXPECT_FALSE(io::is_plain_name(bad)) << bad;
  for (const char* ok : {"fewshot/10/train.tsv", "a/...", "a/.b/c"}) EXPECT_TRUE(io::is_plain_relative_path(ok)) << ok;
  for (const char* bad : {"", ".", "..", "/a", "a/", "a//b", "a/./b", "a/../b", "../a", "a/..", "/"})
    EXPECT_FALSE(io::is_plain_relative_path(bad)) << bad;
}
