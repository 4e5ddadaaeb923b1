// results.jsonl (genemask/eval/results.hpp), the one reader and writer of the sweep's
// records: what is written reads back the same, a torn last line is left out (and cut off
// with repair), and every other bad line is an error naming the file, the line and the field.
#include "genemask/eval/results.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "io/error.hpp"
#include "io/json.hpp"
#include "io/table_text.hpp"
#include "test_util.hpp"

using namespace genemask;
using genemask::test::error_of;

namespace {

results::RunMetrics some_metrics() {
  results::RunMetrics m;
  m.test.accuracy = 0.75;
  m.test.auc = 0.8125;
  m.test.f1 = 0.5;
  m.test.mcc = -0.25;
  m.test.n = 40;
  m.test.classes = 3;
  m.n_train = 30;
  return m;
}

}  // namespace

TEST(Results, RecordsRoundTripWithEveryMetric) {
  test::TempDir tmp;
  const auto m = some_metrics();
  auto ok = results::make_record("GeneMask 10K", "LOGO", "prom-core", 10, 7, &m, "");
  ok.seconds = 1.5;
  ok.attempts = 2;
  ok.checkpoint = "/runs/g/checkpoints/step-00000020";
  ok.checkpoint_step = 20;
  auto failed = results::make_record("B", "", "t", 50, 1, nullptr, "out of memory");
  failed.checkpoint = "random";
  test::write_file(tmp.file("r.jsonl"), ok.to_json().dump() + "\n" + failed.to_json().dump() + "\n");
  const auto rf = results::read_results(tmp.file("r.jsonl"), false, false);
  ASSERT_EQ(rf.records.size(), 2u);
  const auto& a = rf.records[0];
  EXPECT_EQ(a.job, "GeneMask 10K|prom-core|10|7");
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(a.line, 1u);
  EXPECT_EQ(a.attempts, 2);
  for (const auto& f : metrics::kMetricFields) {
    EXPECT_EQ(a.metrics.test.*f.member, m.test.*f.member) << f.name;
    EXPECT_EQ(a.values.at(f.name), m.test.*f.member) << f.name;
  }
  EXPECT_EQ(a.metrics.n_train, 30u);
  EXPECT_EQ(a.metrics.test.n, 40u);
  EXPECT_EQ(a.metrics.test.classes, 3);
  EXPECT_EQ(a.checkpoint, "/runs/g/checkpoints/step-00000020");
  EXPECT_EQ(a.checkpoint_step, 20);
  EXPECT_FALSE(rf.records[1].ok);
  EXPECT_EQ(rf.records[1].checkpoint, "random");
  EXPECT_EQ(rf.records[1].checkpoint_step, -1);  // null in the file
  EXPECT_TRUE(failed.to_json().at("checkpoint_step").is_null());
  // test_in_train: written and read back where measured, absent (-1) where not.
  EXPECT_EQ(a.metrics.test_in_train, -1);
  EXPECT_FALSE(ok.to_json().contains("test_in_train"));
  auto seen = ok;
  seen.metrics.test_in_train = 3;
  test::write_file(tmp.file("s.jsonl"), seen.to_json().dump() + "\n");
  EXPECT_EQ(results::read_results(tmp.file("s.jsonl"), false, false).records.at(0).metrics.test_in_train, 3);
  // test_duplicates: the same.
  EXPECT_EQ(a.metrics.test_duplicates, -1);
  EXPECT_FALSE(ok.to_json().contains("test_duplicates"));
  seen.metrics.test_duplicates = 2;
  test::write_file(tmp.file("d.jsonl"), seen.to_json().dump() + "\n");
  EXPECT_EQ(results::read_results(tmp.file("d.jsonl"), false, false).records.at(0).metrics.test_duplicates, 2);
  EXPECT_EQ(rf.records[1].error, "out of memory");
  EXPECT_TRUE(rf.records[1].values.empty());
  EXPECT_TRUE(rf.warnings.empty());
}

TEST(Results, TornLastLineIsLeftOutAndCutWithRepair) {
  test::TempDir tmp;
  const std::string p = tmp.file("results.jsonl");
  const std::string good = R"({"model":"a","task":"t","shots":10,"seed":1,"status":"ok","accuracy":0.5})" "\n"
                           R"({"model":"a","task":"t","shots":10,"seed":2,"status":"failed"})" "\n";
  const std::string torn = R"({"job":"a|t|10|3","sta)";
  test::write_file(p, good + torn);
  auto rf = results::read_results(p, /*repair=*/false, false);
  EXPECT_EQ(rf.records.size(), 2u);
  EXPECT_EQ(rf.repaired_bytes, torn.size());
  ASSERT_EQ(rf.warnings.size(), 1u);
  EXPECT_EQ(rf.warnings[0], p + ":3: ignoring the last line, which is not complete JSON and has no newline (a sweep "
                                "stopped while writing it; rerunning the sweep redoes that job)");
  EXPECT_EQ(test::read_file(p), good + torn);  // not repaired
  rf = results::read_results(p, /*repair=*/true, false);
  EXPECT_EQ(test::read_file(p), good);
  // A complete last record without its newline is kept; repair gives it the newline, so that
  // the next append starts a line of its own.
  const std::string last = R"({"model":"a","task":"t","shots":10,"seed":3,"status":"ok","accuracy":0.25})";
  test::write_file(p, good + last);
  rf = results::read_results(p, /*repair=*/true, false);
  EXPECT_EQ(rf.records.size(), 3u);
  EXPECT_EQ(test::read_file(p), good + last + "\n");
  // A missing file: empty for the sweep, an error for the report.
  EXPECT_TRUE(results::read_results(tmp.file("none.jsonl"), true, /*missing_ok=*/true).records.empty());
  EXPECT_NE(error_of([&] { results::read_results(tmp.file("none.jsonl"), false, false); }).find("cannot open"),
            std::string::npos);
}

TEST(Results, BadLinesNameFileLineAndField) {
  test::TempDir tmp;
  const std::string p = tmp.file("results.jsonl");
  const std::string good = R"({"model":"a","task":"t","shots":10,"seed":1,"status":"ok","accuracy":0.5})" "\n";
  auto error = [&](const std::string& text) {
    test::write_file(p, text);
    return error_of([&] { results::read_results(p, true, false); });
  };
  EXPECT_EQ(error("{oops}\n" + good), p + ":1: not valid JSON ({oops}): every line must be one JSON object as "
                                          "`genemask sweep` writes it; repair or remove the line");
  EXPECT_EQ(error("[1, 2]\n" + good), p + ":1: not a JSON object ([1, 2]): every line must be one JSON object as "
                                          "`genemask sweep` writes it; repair or remove the line");
  EXPECT_EQ(error(R"({"model":"a","task":"t","shots":"ten","seed":1,"status":"ok"})" "\n" + good),
            p + ":1: \"shots\" is \"ten\", expected an integer");
  EXPECT_EQ(error(good + R"({"model":"a","task":"t","shots":10,"seed":1,"status":"done"})" "\n"),
            p + ":2: \"status\" is \"done\", expected \"ok\" or \"failed\"");
  EXPECT_EQ(error(R"({"model":"a","task":"t","shots":10,"seed":1,"status":"ok","auc":"high"})" "\n"),
            p + ":1: job a|t|10|1: \"auc\" is \"high\", expected a number");
  EXPECT_EQ(error(R"({"job":"a|t|10|9","model":"a","task":"t","shots":10,"seed":1,"status":"ok"})" "\n"),
            p + ":1: \"job\" is \"a|t|10|9\" but its model, task, shots and seed make \"a|t|10|1\"");
  EXPECT_EQ(error(R"({"task":"t","shots":10,"seed":1,"status":"ok"})" "\n"), p + ":1: the record has no \"model\"");
  // The count fields. Those the report checks with: a negative one was read as 0 (n_train,
  // n_test) or as 2^64 - 3 (classes), as the shots' bound below 1 was missing too.
  const std::string classes_bound = " and <= 2147483647";
  for (const auto& [field, value, bound] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"test_in_train", "-2", ""},
                                                                      {"test_duplicates", "-1", ""},
                                                                      {"n_train", "-1", ""},
                                                                      {"n_test", "-5", ""},
                                                                      {"classes", "-3", classes_bound},
                                                                      {"classes", "4294967298", classes_bound}})
    EXPECT_EQ(error(R"({"model":"a","task":"t","shots":10,"seed":1,"status":"ok",")" + field + "\":" + value + "}\n"),
              p + ":1: job a|t|10|1: \"" + field + "\" is " + value + ", expected a count >= 0" + bound);
  EXPECT_NE(error(R"({"model":"a","task":"t\n%x","shots":10,"seed":1,"status":"ok"})" "\n")
                .find(p + ":1: task name \"t\\x0a%x\" holds a control character (byte 0x0a"),
            std::string::npos);
  EXPECT_NE(error(R"({"model":"a","group":"\u001b[2J","task":"t","shots":10,"seed":1,"status":"ok"})" "\n")
                .find("group name"),
            std::string::npos);
  // Unicode's line breaks and bidirectional overrides, and C1's NEL: a line of its own, or text
  // shown reordered.
  for (const auto& [name, what] : {std::pair{"a\u2028b", "U+2028 at position 2"}, std::pair{"ab\u202ec", "U+202E at position 3"},
                                   std::pair{"a\u0085", "U+0085 at position 2"}, std::pair{"a\u2067", "U+2067 at position 2"}})
    EXPECT_NE(error(fmt::format(R"({{"model":"{}","task":"t","shots":10,"seed":1,"status":"ok"}})", name) + "\n")
                  .find(fmt::format("holds a control character ({})", what)),
              std::string::npos)
        << name;
  EXPECT_EQ(io::first_control_char("GeneMask \u00e9t\u00e9 \u2013 10K"), std::string::npos);  // é and an en dash are text
}

// Issue 21: the report bolded an accuracy of 7.5 or -1 as the best result.
TEST(Results, MetricsOutsideTheirRangeAreErrors) {
  test::TempDir tmp;
  const std::string p = tmp.file("results.jsonl");
  auto line = [](const std::string& metric, const std::string& value) {
    return R"({"model":"a","task":"t","shots":10,"seed":4,"status":"ok",")" + metric + "\":" + value + "}\n";
  };
  auto error = [&](const std::string& text) {
    test::write_file(p, text);
    return error_of([&] { results::read_results(p, false, false); });
  };
  EXPECT_EQ(error(line("accuracy", "7.5")),
            p + ":1: job a|t|10|4: \"accuracy\" is 7.5, outside its range [0, 1]: the record is damaged or not "
                "written by `genemask sweep`; repair or remove the line");
  EXPECT_NE(error(line("accuracy", "-1")).find(p + ":1: job a|t|10|4: \"accuracy\" is -1, outside its range [0, 1]"),
            std::string::npos);
  EXPECT_NE(error(line("auc", "1.01")).find("\"auc\" is 1.01, outside its range [0, 1]"), std::string::npos);
  EXPECT_NE(error(line("f1", "-0.5")).find("\"f1\" is -0.5, outside its range [0, 1]"), std::string::npos);
  EXPECT_NE(error(line("mcc", "-1.5")).find("\"mcc\" is -1.5, outside its range [-1, 1]"), std::string::npos);
  EXPECT_NE(error(line("mcc", "1e308")).find("\"mcc\" is 1e+308, outside its range [-1, 1]"), std::string::npos);
  // At the limits, and a rounding step past them, values are fine.
  for (const auto& [m, v] : {std::pair{"accuracy", "0"}, {"accuracy", "1"}, {"mcc", "-1"}, {"mcc", "1.0000000000000002"},
                             {"auc", "0.5"}, {"f1", "1"}})
    EXPECT_EQ(error(line(m, v)), "no error") << m << " " << v;
}

TEST(Results, ACompleteLastLineIsNotATornWrite) {
  test::TempDir tmp;
  const std::string p = tmp.file("results.jsonl");
  const std::string good = R"({"model":"a","task":"t","shots":10,"seed":1,"status":"ok","accuracy":0.5})" "\n";
  const std::string nan = R"({"model":"a","task":"t","shots":10,"seed":2,"status":"ok","accuracy":NaN})";
  test::write_file(p, good + nan + "\n");
  EXPECT_EQ(error_of([&] { results::read_results(p, /*repair=*/true, false); }),
            p + ":2: not valid JSON (" + nan.substr(0, 60) + "...): every line must be one JSON object as `genemask sweep` "
                "writes it; repair or remove the line");
  EXPECT_EQ(test::read_file(p), good + nan + "\n");  // not cut off
  // Without its newline it may be a write cut short: left out with a warning.
  test::write_file(p, good + nan);
  const auto rf = results::read_results(p, false, false);
  EXPECT_EQ(rf.records.size(), 1u);
  EXPECT_EQ(rf.warnings.size(), 1u);
  // A line nested 100,000 deep is an error, not a crash.
  test::write_file(p, good + std::string(100000, '[') + "\n" + good);
  EXPECT_NE(error_of([&] { results::read_results(p, false, false); })
                .find(p + ":2: arrays and objects nested more than 64 levels deep"),
            std::string::npos);
}

TEST(Results, AFileThatCannotBeOpenedIsNotAMissingOne) {
  test::TempDir tmp;
  const std::string p = tmp.file("results.jsonl");
  test::write_file(p, R"({"model":"a","task":"t","shots":10,"seed":1,"status":"ok","accuracy":0.5})" "\n");
  std::string e;
  {
    test::NoMoreFiles limit;  // a resumed sweep must not take "cannot open" for "no results yet"
    e = error_of([&] { results::read_results(p, /*repair=*/true, /*missing_ok=*/true); });
  }
  EXPECT_EQ(e.rfind(p + ": cannot open the file (Too many open files (EMFILE", 0), 0u) << e;
}

// Issue 31: every record names the SHA-256 of the tables and weights its job read.
TEST(Results, InputDigestsRoundTripAndMustBeDigests) {
  test::TempDir tmp;
  const auto m = some_metrics();
  auto ok = results::make_record("m", "", "t", 10, 1, &m, "");
  ok.train_sha256 = std::string(64, 'a');
  ok.test_sha256 = std::string(64, 'b');
  auto random = results::make_record("r", "", "t", 10, 1, &m, "");  // a built-in random model: no weights
  random.train_sha256 = std::string(64, 'a');
  random.test_sha256 = std::string(64, 'b');
  EXPECT_TRUE(random.to_json().at("model_sha256").is_null());
  test::write_file(tmp.file("r.jsonl"), ok.to_json().dump() + "\n" + random.to_json().dump() + "\n");
  const auto rf = results::read_results(tmp.file("r.jsonl"), false, false);
  EXPECT_EQ(rf.records[0].train_sha256, std::string(64, 'a'));
  EXPECT_EQ(rf.records[0].test_sha256, std::string(64, 'b'));
  EXPECT_EQ(rf.records[1].model_sha256, "");
  auto j = ok.to_json();
  j["test_sha256"] = "not-a-digest";
  j.erase("record_sha256");  // written by hand: the field's own check speaks
  test::write_file(tmp.file("bad.jsonl"), j.dump() + "\n");
  EXPECT_EQ(error_of([&] { results::read_results(tmp.file("bad.jsonl"), false, false); }),
            tmp.file("bad.jsonl") + ":1: job m|t|10|1: \"test_sha256\" is \"not-a-digest\", not a SHA-256 (64 lower-case "
                                    "hex digits)");
}

// A record carries the SHA-256 of its other fields: read back as written (whatever the
// spacing or key order another JSON writer gives the same values), it is sealed; a value
// changed since is refused, naming the line.
TEST(Results, RecordsAreSealedAndAnEditIsRefused) {
  test::TempDir tmp;
  auto m = some_metrics();
  m.test.accuracy = 0.1 + 0.2;  // digits that a shorter rewrite would lose
  m.test.auc = 1e-300;
  auto r = results::make_record("GeneMask \u00e9", "G", "t", 1000, UINT64_MAX, &m, "");
  r.seconds = 123456789.125;
  r.train_sha256 = std::string(64, 'a');
  auto failed = results::make_record("B", "", "t", 50, 1, nullptr, std::string("bad byte \xff here"));
  const auto a = r.to_json(), b = failed.to_json();
  ASSERT_TRUE(a.contains("record_sha256"));
  EXPECT_EQ(a["record_sha256"], results::record_digest(a));
  EXPECT_EQ(a["record_sha256"].get<std::string>().size(), 64u);
  const std::string good = io::json_text(a) + "\n" + io::json_text(b) + "\n";
  test::write_file(tmp.file("r.jsonl"), good);
  const auto rf = results::read_results(tmp.file("r.jsonl"), false, false);
  ASSERT_EQ(rf.records.size(), 2u);
  EXPECT_TRUE(rf.records[0].sealed);
  EXPECT_TRUE(rf.records[1].sealed);
  EXPECT_EQ(rf.records[0].metrics.test.accuracy, 0.1 + 0.2);
  // Keys in another order: the same values, still sealed.
  nlohmann::ordered_json reordered;
  for (auto it = a.rbegin(); it != a.rend(); ++it) reordered[it.key()] = *it;
  test::write_file(tmp.file("o.jsonl"), reordered.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                            "\n");
  EXPECT_TRUE(results::read_results(tmp.file("o.jsonl"), false, false).records[0].sealed);
  // An accuracy rewritten with fewer digits, a seed changed, the digest itself changed.
  for (const auto& [key, value] : {std::pair<std::string, nlohmann::json>{"accuracy", 0.3}, {"seed", 5},
                                   {"record_sha256", std::string(64, '0')}, {"record_sha256", 7}}) {
    auto e = a;
    e[key] = value;
    if (key == "seed") e["job"] = "GeneMask \u00e9|t|1000|5";
    test::write_file(tmp.file("e.jsonl"), good + io::json_text(e) + "\n");
    EXPECT_EQ(error_of([&] { results::read_results(tmp.file("e.jsonl"), false, false); }),
              tmp.file("e.jsonl") + ":3: the record is not as `genemask sweep` wrote it: its fields do not match its "
                                    "record_sha256 (a value was edited, or the line was rewritten by another program, "
                                    "e.g. with other digits); restore the line from a copy of the file, or remove it "
                                    "(`genemask sweep` then runs the job again)")
        << key;
  }
  // Without the key (by hand, or a genemask of before): read, not sealed.
  auto h = a;
  h.erase("record_sha256");
  test::write_file(tmp.file("h.jsonl"), io::json_text(h) + "\n");
  EXPECT_FALSE(results::read_results(tmp.file("h.jsonl"), false, false).records[0].sealed);
}
