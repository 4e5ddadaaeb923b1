#include "genemask/eval/results.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "io/atomic_file.hpp"
#include "io/error.hpp"
#include "io/json.hpp"
#include "io/sha256.hpp"
#include "io/table_text.hpp"

namespace genemask::results {

using nlohmann::json;

std::string job_key(const std::string& model, const std::string& task, int64_t shots, uint64_t seed) {
  return fmt::format("{}|{}|{}|{}", model, task, shots, seed);
}

json Record::to_json() const {
  json j{{"job", job},   {"model", model}, {"group", group},          {"task", task},
         {"shots", shots}, {"seed", seed},  {"status", ok ? "ok" : "failed"}};
  if (ok) metrics.to_json(j);
  j["seconds"] = seconds;
  j["host"] = host;
  j["rank"] = rank;
  j["device"] = device;
  j["attempts"] = attempts;
  j["out"] = out;
  j["checkpoint"] = checkpoint;
  j["checkpoint_step"] = checkpoint_step >= 0 ? json(checkpoint_step) : json();
  if (!finetune.is_null()) j["finetune"] = finetune;
  const auto digest = [](const std::string& s) { return s.empty() ? json() : json(s); };
  j["train_sha256"] = digest(train_sha256);
  j["test_sha256"] = digest(test_sha256);
  j["model_sha256"] = digest(model_sha256);
  if (simulated) j["simulated"] = true;
  if (jobs_total >= 0) j["jobs_total"] = jobs_total;
  if (!sweep_id.empty()) j["sweep_id"] = sweep_id;
  if (!arm.empty()) {
    j["arm"] = arm;
    j["replicate"] = replicate;
  }
  if (!ok) j["error"] = error;
  j["record_sha256"] = record_digest(j);
  return j;
}

std::string record_digest(const nlohmann::json& record) {
  json rest = record;
  rest.erase("record_sha256");
  return io::sha256_hex(io::json_text(rest));
}

Record make_record(const std::string& model, const std::string& group, const std::string& task, int64_t shots,
                   uint64_t seed, const RunMetrics* ok_metrics, const std::string& error) {
  Record r;
  r.job = job_key(model, task, shots, seed);
  r.model = model;
  r.group = group;
  r.task = task;
  r.shots = shots;
  r.seed = seed;
  r.ok = ok_metrics != nullptr;
  if (ok_metrics) {
    r.metrics = *ok_metrics;
    for (const auto& f : metrics::kMetricFields) r.values[f.name] = r.metrics.test.*f.member;
  }
  r.error = error;
  return r;
}

namespace {

/// Field access with errors that name the line, the field and what was there.
class Fields {
 public:
  Fields(const json& j, const std::string& path, uint64_t line) : j_(j), path_(path), line_(line) {}
  const json* find(const char* name) const {
    auto it = j_.find(name);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string string(const char* name, bool required = true) const {
    const json* v = find(name);
    if (!v) {
      if (required) fail(fmt::format("the record has no \"{}\"", name));
      return "";
    }
    if (!v->is_string()) fail(fmt::format("\"{}\" is {}, expected a string", name, io::json_excerpt(*v)));
    return v->get<std::string>();
  }
  int64_t integer(const char* name, bool required = true) const {
    const json* v = find(name);
    if (!v) {
      if (required) fail(fmt::format("the record has no \"{}\"", name));
      return 0;
    }
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)))
      fail(fmt::format("\"{}\" is {}, expected an integer", name, io::json_excerpt(*v)));
    return v->get<int64_t>();
  }
  /// An integer in [0, 2^64-1] (a seed: sweeps and finetune take the whole range).
  uint64_t unsigned_integer(const char* name) const {
    const json* v = find(name);
    if (!v) fail(fmt::format("the record has no \"{}\"", name));
    if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0))
      fail(fmt::format("\"{}\" is {}, expected an integer in [0, 2^64-1]", name, io::json_excerpt(*v)));
    return v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  [[noreturn]] void fail(const std::string& what) const { throw io::InputError(path_, line_, what); }

 private:
  const json& j_;
  const std::string& path_;
  uint64_t line_;
};

Record parse_record(const json& j, const std::string& path, uint64_t line) {
  const Fields f(j, path, line);
  Record r;
  r.line = line;
  // First: a line changed after the sweep wrote it is named as such, whatever else it says.
  if (const json* v = f.find("record_sha256")) {
    if (!v->is_string() || v->get<std::string>() != record_digest(j))
      f.fail(fmt::format("the record is not as `genemask sweep` wrote it: its fields do not match its record_sha256 "
                         "(a value was edited, or the line was rewritten by another program, e.g. with other digits); "
                         "restore the line from a copy of the file, or remove it (`genemask sweep` then runs the job "
                         "again)"));
    r.sealed = true;
  }
  r.model = f.string("model");
  r.task = f.string("task");
  if (r.model.empty() || r.task.empty()) f.fail("empty \"model\" or \"task\" name");
  // '|' separates the parts of a job key: model "a|b" of task "c" and model "a" of task
  // "b|c" would be one job, the later record replacing the other without a word. A plan
  // refuses such names; a results file merged or written by hand may hold them.
  for (const auto* name : {&r.model, &r.task}) {
    if (name->find('|') != std::string::npos)
      f.fail(fmt::format("{} name \"{}\" holds '|', which separates the parts of a job key (model|task|shots|seed); "
                         "rename it",
                         name == &r.model ? "model" : "task", io::excerpt(*name, 80)));
  }
  r.shots = f.integer("shots");
  // N sequences of each class, N >= 1 (a plan refuses others): a record of 0 or -10 shots,
  // merged or written by hand, was shown as Table 1's rows "0" and "-10".
  if (r.shots < 1)
    f.fail(fmt::format("\"shots\" is {}: a few-shot job trains on N >= 1 sequences of each class; repair or remove "
                       "the line",
                       r.shots));
  r.seed = f.unsigned_integer("seed");
  r.group = f.string("group", false);
  // A line break in a name started a line of its own in the report's tables and job lists
  // (a `%` comment of table1.tex went on as live LaTeX). A plan refuses such names.
  for (const auto& [name, what] : {std::pair{&r.model, "model"}, std::pair{&r.task, "task"}, std::pair{&r.group, "group"}})
    if (const size_t at = io::first_control_char(*name); at != std::string::npos)
      f.fail(fmt::format("{} name \"{}\" holds a control character ({} at position {}): names are printed into the "
                         "lines of the report's tables; rename it",
                         what, io::printable(io::excerpt(*name, 80)),
                         io::describe_control_char(*name, at), at + 1));
  const std::string key = job_key(r.model, r.task, r.shots, r.seed);
  r.job = f.find("job") ? f.string("job") : key;
  if (r.job != key)
    f.fail(fmt::format("\"job\" is \"{}\" but its model, task, shots and seed make \"{}\"", r.job, key));
  const std::string status = f.string("status");
  if (status != "ok" && status != "failed")
    f.fail(fmt::format("\"status\" is \"{}\", expected \"ok\" or \"failed\"", status));
  r.ok = status == "ok";
  if (r.ok) {
    for (const auto& m : metrics::kMetricFields) {
      const json* v = f.find(m.name);
      if (!v) continue;
      if (!v->is_number())
        f.fail(fmt::format("job {}: \"{}\" is {}, expected a number", r.job, m.name, io::json_excerpt(*v)));
      const double x = v->get<double>();
      if (!(x >= m.min - metrics::kMetricRangeSlack && x <= m.max + metrics::kMetricRangeSlack))
        f.fail(fmt::format("job {}: \"{}\" is {}, outside its range [{}, {}]: the record is damaged or not written "
                           "by `genemask sweep`; repair or remove the line",
                           r.job, m.name, io::json_excerpt(*v), m.min, m.max));
      r.metrics.test.*m.member = r.values[m.name] = x;
    }
    // Counts: absent (records of before) is 0; a negative one was read as 0 (n_train,
    // n_test) or as 2^64 - 3 sequences of each class (classes), and is refused.
    const auto count = [&](const char* name, int64_t max = INT64_MAX) {
      const int64_t v = f.integer(name, false);
      if (v < 0 || v > max)
        f.fail(fmt::format("job {}: \"{}\" is {}, expected a count >= 0{}", r.job, name, v,
                           max == INT64_MAX ? "" : fmt::format(" and <= {}", max)));
      return v;
    };
    r.metrics.n_train = static_cast<uint64_t>(count("n_train"));
    r.metrics.test.n = static_cast<uint64_t>(count("n_test"));
    r.metrics.test.classes = static_cast<int>(count("classes", INT_MAX));
    r.metrics.precision = f.string("precision", false);  // absent in records of before
    for (auto [name, field] : {std::pair{"test_in_train", &r.metrics.test_in_train},
                               std::pair{"test_duplicates", &r.metrics.test_duplicates},
                               std::pair{"truncated", &r.metrics.truncated},
                               std::pair{"unknown_only", &r.metrics.unknown_only},
                               std::pair{"unterminated_tables", &r.metrics.unterminated_tables}})
      if (f.find(name)) *field = count(name);
  } else {
    r.error = f.string("error", false);
  }
  if (const json* v = f.find("seconds"); v && v->is_number()) r.seconds = v->get<double>();
  r.host = f.string("host", false);
  r.device = f.string("device", false);
  r.out = f.string("out", false);
  r.checkpoint = f.string("checkpoint", false);  // absent in records of before
  if (f.find("checkpoint_step")) r.checkpoint_step = f.integer("checkpoint_step");
  if (const json* v = f.find("finetune")) {  // absent in records of before
    if (!v->is_object() || v->empty())
      f.fail(fmt::format("job {}: \"finetune\" is {}, expected the fine-tuning settings (an object)", r.job,
                         io::json_excerpt(*v)));
    r.finetune = *v;
  }
  r.arm = f.string("arm", false);
  if (f.find("replicate")) r.replicate = f.integer("replicate");
  if (r.arm.empty() != (r.replicate < 0))
    f.fail(fmt::format("job {}: \"arm\" and \"replicate\" (an integer >= 0) go together", r.job));
  if (const json* v = f.find("simulated")) {
    if (!v->is_boolean()) f.fail(fmt::format("\"simulated\" is {}, expected true or false", io::json_excerpt(*v)));
    r.simulated = v->get<bool>();
  }
  for (auto [name, field] : {std::pair{"train_sha256", &r.train_sha256}, std::pair{"test_sha256", &r.test_sha256},
                             std::pair{"model_sha256", &r.model_sha256}}) {
    *field = f.string(name, false);  // absent (or null) in records of before
    if (!field->empty() && (field->size() != 64 || field->find_first_not_of("0123456789abcdef") != std::string::npos))
      f.fail(fmt::format("job {}: \"{}\" is \"{}\", not a SHA-256 (64 lower-case hex digits)", r.job, name,
                         io::excerpt(*field, 80)));
  }
  if (f.find("rank")) r.rank = static_cast<int>(f.integer("rank"));
  if (f.find("attempts")) r.attempts = static_cast<int>(f.integer("attempts"));
  if (f.find("jobs_total")) {  // absent in records of before
    r.jobs_total = f.integer("jobs_total");
    if (r.jobs_total < 1) f.fail(fmt::format("job {}: \"jobs_total\" is {}, expected a count >= 1", r.job, r.jobs_total));
  }
  r.sweep_id = f.string("sweep_id", false);  // absent in records of before
  return r;
}

}  // namespace

ResultsFile read_results(const std::string& path, bool repair, bool missing_ok) {
  ResultsFile rf;
  io::check_input_type(path);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    // Only a file that is not there is "no results yet": one that cannot be opened (no
    // more file descriptors, no permission) would make a resumed sweep redo every job.
    if (missing_ok && err == ENOENT) return rf;
    throw io::InputError(path, fmt::format("cannot open the file ({}); check the path (it should be the sweep's "
                                           "results.jsonl)",
                                           io::open_error_reason(err)));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  in.close();
  // Lines with their numbers and where they end; the last non-blank line may be a torn write.
  struct Line {
    uint64_t no;
    size_t begin, end;  // [begin, end) without the newline
    bool newline;
  };
  std::vector<Line> lines;
  uint64_t no = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    ++no;
    if (text.find_first_not_of(" \t\r", pos) < end) lines.push_back({no, pos, end, nl != std::string::npos});
    pos = end + 1;
  }
  size_t good_end = 0;  // bytes of the file up to the end of the last record kept
  bool needs_newline = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    const std::string s = text.substr(l.begin, l.end - l.begin);
    io::JsonParse parsed = io::try_parse_json(s);
    const json& j = parsed.value;
    if (!parsed.ok() || !j.is_object()) {
      // A sweep writes a record and its newline in one write(2): only a last line without
      // its newline can be one cut short by a crash. A complete line is what was written.
      if (i + 1 == lines.size() && !l.newline) {
        rf.repaired_bytes = text.size() - good_end;
        rf.warnings.push_back(fmt::format("{}:{}: ignoring the last line, which is not complete JSON and has no "
                                          "newline (a sweep stopped while writing it; rerunning the sweep redoes "
                                          "that job)",
                                          path, l.no));
        break;
      }
      const bool deep = !parsed.ok() && parsed.error.rfind("not valid JSON", 0) != 0;
      throw io::InputError(path, l.no, fmt::format("{} ({}): every line must be one JSON object as `genemask sweep` "
                                                   "writes it; repair or remove the line",
                                                   deep ? parsed.error : !parsed.ok() ? "not valid JSON" : "not a JSON object",
                                                   io::excerpt(s, 60)));
    }
    Record r = parse_record(j, path, l.no);
    r.text = s;
    rf.records.push_back(std::move(r));
    good_end = l.newline ? l.end + 1 : l.end;
    needs_newline = !l.newline;
  }
  if (repair && (rf.repaired_bytes > 0 || needs_newline)) {
    if (::truncate(path.c_str(), static_cast<off_t>(good_end)) != 0)
      throw std::runtime_error(fmt::format("cannot truncate the torn last line of {}: {}", path, std::strerror(errno)));
    if (needs_newline)  // a complete record without its newline: the next append starts a line
      io::AppendFile(path, /*sync=*/true).append("\n");
  }
  return rf;
}

}  // namespace genemask::results
