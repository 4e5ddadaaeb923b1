// Issue 21: with the limit on open files reached (ulimit -n), an open failed as "missing,
// unreadable or not HDF5" or "cannot open". Every reader names EMFILE and the limit.
#include <gtest/gtest.h>

#include <string>

#include "io/error.hpp"
#include "io/h5.hpp"
#include "io/json.hpp"
#include "io/task_table.hpp"
#include "io/text_source.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::error_of;
using genemask::test::TempDir;

namespace {
/// "<path>: <what>: Too many open files (EMFILE: this process may have at most N files open".
std::string emfile(const std::string& path, const std::string& what, uint64_t limit) {
  return path + ": " + what + ": Too many open files (EMFILE: this process may have at most " + std::to_string(limit) +
         " files open";
}
}  // namespace

TEST(OpenLimit, EveryReaderNamesEmfileAndTheLimit) {
  TempDir tmp;
  test::write_file(tmp.file("g.fa"), ">a\nACGT\n");
  test::write_file(tmp.file("t.csv"), "sequence,label\nACGT,0\n");
  test::write_file(tmp.file("c.json"), "{}");
  {
    io::h5::Handle f = io::h5::create_file(tmp.file("x.h5"));
    const uint64_t v[2] = {1, 2};
    io::h5::write_u64(f, "/v", v, 2);
    io::h5::close_file(f);
  }
  test::NoMoreFiles limit;
  const std::string fa = error_of([&] { io::probe_file(tmp.file("g.fa")); });
  const std::string h5 = error_of([&] { io::h5::open_file_ro(tmp.file("x.h5")); });
  const std::string tt = error_of([&] { io::read_task_table(tmp.file("t.csv")); });
  const std::string js = error_of([&] { io::read_json_file(tmp.file("c.json")); });
  const uint64_t n = limit.limit();
  EXPECT_EQ(fa.rfind(emfile(tmp.file("g.fa"), "cannot open", n), 0), 0u) << fa;
  EXPECT_EQ(h5.rfind(emfile(tmp.file("x.h5"), "cannot open as an HDF5 file", n), 0), 0u) << h5;
  EXPECT_EQ(tt.rfind(emfile(tmp.file("t.csv"), "cannot open", n), 0), 0u) << tt;
  EXPECT_EQ(js.rfind(emfile(tmp.file("c.json"), "cannot open", n), 0), 0u) << js;
  EXPECT_NE(h5.find("ulimit -n"), std::string::npos) << h5;
}

TEST(OpenLimit, AFileThatIsNotHdf5IsToldApartFromOneThatCannotBeOpened) {
  TempDir tmp;
  test::write_file(tmp.file("not.h5"), "hello");
  EXPECT_EQ(error_of([&] { io::h5::open_file_ro(tmp.file("not.h5")); }),
            tmp.file("not.h5") + ": cannot open as an HDF5 file: it is readable but not HDF5 (or a damaged one)");
  EXPECT_EQ(error_of([&] { io::h5::open_file_ro(tmp.file("none.h5")); }),
            tmp.file("none.h5") + ": cannot open as an HDF5 file: No such file or directory");
}
