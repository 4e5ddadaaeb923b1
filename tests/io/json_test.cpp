#include "io/json.hpp"

#include <sys/resource.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "io/error.hpp"
#include "io/shard_manifest.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::error_of;
using genemask::test::TempDir;

namespace {
std::string nested(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}
}  // namespace

TEST(Json, DepthIsCheckedExactlyAtTheLimit) {
  EXPECT_EQ(io::json_too_deep_at(nested(io::kMaxJsonDepth)), std::string::npos);
  EXPECT_EQ(io::json_too_deep_at(nested(io::kMaxJsonDepth + 1)), static_cast<size_t>(io::kMaxJsonDepth));
  EXPECT_TRUE(io::try_parse_json(nested(io::kMaxJsonDepth)).ok());
  // Siblings are not depth: a long flat list is fine.
  std::string flat = "[";
  for (int i = 0; i < 1000; ++i) flat += std::string(i ? "," : "") + "{\"a\": [1]}";
  EXPECT_EQ(io::json_too_deep_at(flat + "]"), std::string::npos);
}

TEST(Json, BracketsInsideStringsDoNotCount) {
  const std::string in_string = "{\"a\": \"" + std::string(100, '[') + "\"}";
  EXPECT_EQ(io::json_too_deep_at(in_string), std::string::npos);
  EXPECT_TRUE(io::try_parse_json(in_string).ok());
  // An escaped quote does not end the string; closing brackets in a string do not undo depth.
  EXPECT_EQ(io::json_too_deep_at("[\"\\\"[[[[\"]"), std::string::npos);
  const std::string trick = std::string(40, '[') + "\"" + std::string(40, ']') + "\"," + std::string(40, '[');
  EXPECT_EQ(io::json_too_deep_at(trick), 40u + 1 + 40 + 2 + 24);  // the 25th '[' after the string
}

// Regression: a plan.json of 100,000 '[' crashed (SIGSEGV) in dump() while formatting the
// error; parse_json refuses it by name, line and depth before parsing.
TEST(Json, HundredThousandLevelsAreAnErrorNotACrash) {
  const std::string deep = "{\"models\":\n" + nested(100000) + "}";
  EXPECT_EQ(error_of([&] { io::parse_json(deep, "p.json"); }),
            "p.json:2: arrays and objects nested more than 64 levels deep (byte 75): not a file genemask reads");
  const std::string open_only(100000, '{');
  EXPECT_FALSE(io::try_parse_json(open_only).ok());
}

TEST(Json, ParseErrorsNameTheLineAndTheHint) {
  const std::string e = error_of([] { io::parse_json("{\n\"a\": 1,\n}", "x.json", "repair it"); });
  EXPECT_EQ(e.rfind("x.json:3: not valid JSON: [json.exception.parse_error.101]", 0), 0u) << e;
  EXPECT_NE(e.find("; repair it"), std::string::npos) << e;
  // A jsonl line: the line of the file, not of the text.
  EXPECT_EQ(error_of([] { io::parse_json("nope", "r.jsonl", "", 7); }).rfind("r.jsonl:7: not valid JSON", 0), 0u);
}

// A key given twice in one object was read as its last value, the first dropped without a
// word (a plan edited by appending "seeds": 5 after "seeds": 2, two "models" lists).
TEST(Json, AKeyGivenTwiceInOneObjectIsRefused) {
  EXPECT_EQ(error_of([] { io::parse_json("{\"seeds\": 2,\n \"shots\": [1],\n \"seeds\": 5}", "p.json"); }),
            "p.json:3: the key \"seeds\" appears twice in one object: which value is meant cannot be known; give it "
            "once");
  EXPECT_EQ(error_of([] { io::parse_json(R"({"a": {"x": 1, "x": 2}})", "q.json"); }),
            "q.json:1: the key \"x\" appears twice in one object: which value is meant cannot be known; give it once");
  // The line of the repeat within its own object, past the same key in an inner object and
  // however the key is escaped.
  EXPECT_EQ(error_of([] { io::parse_json("{\"o\": {\n\"h\": 1},\n\"h\": 2,\n\"x\": 0,\n\"h\": 3}", "r.json"); }),
            "r.json:5: the key \"h\" appears twice in one object: which value is meant cannot be known; give it once");
  EXPECT_EQ(error_of([] { io::parse_json("{\"ab\": 1,\n\"a\\u0062\": 2}", "u.json"); }),
            "u.json:2: the key \"ab\" appears twice in one object: which value is meant cannot be known; give it once");
  // The same key in different objects, or as a value, is no duplicate.
  const auto j = io::parse_json(R"({"a": {"x": 1}, "b": {"x": 2}, "x": "x", "l": [{"x": 1}, {"x": 2}]})", "ok.json");
  EXPECT_EQ(j["b"]["x"], 2);
  EXPECT_EQ(j["l"][1]["x"], 2);
}

TEST(Json, ExcerptCutsAndNeverThrows) {
  nlohmann::json j = std::string(500, 'x');
  const std::string ex = io::json_excerpt(j, 20);
  EXPECT_EQ(ex, "\"" + std::string(19, 'x') + "...");
  nlohmann::json bad = std::string("a\xff" "b");  // dump() would throw on invalid UTF-8
  EXPECT_EQ(io::json_excerpt(bad), "\"a\xef\xbf\xbd" "b\"");
}

TEST(Json, ReadJsonFileNamesTheReason) {
  TempDir tmp;
  EXPECT_EQ(error_of([&] { io::read_json_file(tmp.file("none.json")); }),
            tmp.file("none.json") + ": cannot open: No such file or directory");
  test::write_file(tmp.file("deep.json"), nested(65));
  EXPECT_NE(error_of([&] { io::read_json_file(tmp.file("deep.json")); }).find("nested more than 64 levels"),
            std::string::npos);
  test::write_file(tmp.file("ok.json"), "{\"a\": [1, 2]}\n");
  EXPECT_EQ(io::read_json_file(tmp.file("ok.json"))["a"][1], 2);
  EXPECT_FALSE(io::try_read_json_file(tmp.file("none.json")).ok());
}

TEST(OpenErrorReason, NamesEmfileAndTheLimit) {
  struct rlimit rl {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  const std::string r = io::open_error_reason(EMFILE);
  EXPECT_EQ(r.rfind("Too many open files (EMFILE", 0), 0u) << r;
  if (rl.rlim_cur != RLIM_INFINITY)
    EXPECT_NE(r.find("at most " + std::to_string(rl.rlim_cur) + " files open"), std::string::npos) << r;
  EXPECT_NE(r.find("ulimit -n"), std::string::npos) << r;
  EXPECT_EQ(io::open_error_reason(ENOENT), "No such file or directory");
  EXPECT_EQ(io::open_error_reason(0), "unknown reason");
}

TEST(Json, ADeeplyNestedShardManifestIsRefused) {
  TempDir tmp;
  test::write_file(tmp.file("manifest.json"), "{\"shards\": " + std::string(100000, '[') + "}");
  EXPECT_EQ(error_of([&] { io::read_manifest(tmp.path()); }),
            tmp.file("manifest.json") + ":1: arrays and objects nested more than 64 levels deep (byte 75): not a file "
                                        "genemask reads; the manifest is damaged: build the shards again");
}

// Regression: nlohmann reads 1e-400 as 0 without a word (a plan's "lr": 1e-400 trained at 0,
// a record's metric of 1e-400 averaged as 0); it already refuses 1e400. Refused by line,
// against strtod's own reading of each number; zeros, subnormals and strings pass.
TEST(Json, ANumberBelowADoublesRangeIsRefused) {
  EXPECT_EQ(error_of([] { io::parse_json("{\"a\": 1,\n \"lr\": 1e-400}", "p.json"); }),
            "p.json:2: the number 1e-400 is too small for a double (it would be read as 0): write 0, or a number "
            "within 1e-308");
  EXPECT_FALSE(io::try_parse_json("[-2.5E-999]").ok());
  EXPECT_FALSE(io::try_parse_json("[0." + std::string(400, '0') + "1]").ok());
  for (const std::string ok : {std::string("[0, 0.0, -0e-999, 0.000e+5, 1e-310, 2.5e-300, 1e308]"),
                               std::string(R"({"s": "1e-400", "1e-999": 0})"),
                               "[0." + std::string(400, '0') + "]"}) {
    EXPECT_EQ(io::json_underflow_at(ok), std::string::npos) << ok;
    EXPECT_TRUE(io::try_parse_json(ok).ok()) << ok;
  }
  EXPECT_EQ(io::json_underflow_at(R"({"s": "\"1e-400", "x": 1e-400})"), 23u);
  const auto j = io::parse_json("[1e-310]", "s.json");
  EXPECT_GT(j[0].get<double>(), 0.0);
}

// Regression: a plan with a NUL byte after its JSON was read up to the NUL, the rest (here not
// JSON at all) dropped without a word.
TEST(Json, ANulByteIsRefused) {
  const std::string text = std::string("{\"a\": 1}\n") + '\0' + "{\"this is\": not json";
  EXPECT_EQ(error_of([&] { io::parse_json(text, "p.json"); }),
            "p.json:2: not valid JSON: byte 10 is a NUL byte (a binary file, or two files joined?)");
  EXPECT_FALSE(io::try_parse_json(std::string("[1,") + '\0' + "2]").ok());
  EXPECT_TRUE(io::try_parse_json("[\"\\u0000\"]").ok());  // an escaped NUL in a string is JSON
}
