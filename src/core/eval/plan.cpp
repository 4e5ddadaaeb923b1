#include <type_traits>
#include "genemask/eval/plan.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "genemask/eval/results.hpp"
#include "io/error.hpp"
#include "io/json.hpp"
#include "io/listed_paths.hpp"
#include "io/table_text.hpp"
#include "io/run_dir.hpp"
#include "io/parse_number.hpp"
#include "io/sha256.hpp"

namespace fs = std::filesystem;

namespace genemask::sweep {
namespace {

// ---------------------------------------------------------------------------------------
// YAML -> JSON, remembering the source line of every key path so that errors can name it.

nlohmann::json yaml_scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  // "010" is 10 in YAML 1.2 but octal 8 in YAML 1.1 (PyYAML): a leading 0 is kept as text, so
  // that the key's check names it. A number out of range (1e400, 2^64) is kept as text too.
  static const std::regex int_re("[-+]?(0|[1-9][0-9]*)"), float_re("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  const std::string_view unsigned_part = std::string_view(s).substr(s[0] == '+' ? 1 : 0);
  static const std::regex leading_zero("[-+]?0[0-9]+");
  if (std::regex_match(s, leading_zero)) return s;
  if (std::regex_match(s, int_re)) {
    if (s[0] == '-') {
      if (const auto v = io::parse_decimal_i64(s)) return *v;
    } else if (const auto v = io::parse_decimal_u64(unsigned_part)) {
      return *v;
    }
    return s;
  }
  if (std::regex_match(s, float_re))
    if (const auto v = io::parse_decimal_double(s)) return *v;
  return s;
}

/// Expands YAML (aliases included) into JSON. YAML aliases share nodes, so a few hundred
/// bytes of nested aliases ("billion laughs") expand to billions of nodes: the expansion
/// counts the nodes it makes and stops at kMaxPlanNodes.
struct YamlBudget {
  const std::string& source;
  uint64_t nodes = 0;
};

[[noreturn]] void too_deep(const std::string& source, int line, const std::string& why) {
  throw PlanError(fmt::format("{}:{}: the plan nests lists and mappings more than {} levels deep{}; a plan needs a "
                              "few levels",
                              source, line, io::kMaxJsonDepth, why));
}

/// yaml-cpp's parser recurses once per level of nesting (version 0.6 without a limit: a
/// plan of 100,000 '[' overflowed the stack), and so does building nodes from its events.
/// This first pass sees the events in order and stops at kMaxJsonDepth levels, before the
/// recursion goes deeper.
class YamlDepthGuard final : public YAML::EventHandler {
 public:
  explicit YamlDepthGuard(const std::string& source) : source_(source) {}
  // A second document ("---" and another plan) was parsed and then dropped: YAML::Load reads
  // the first only. A plan is one document.
  void OnDocumentStart(const YAML::Mark& m) override {
    if (++documents_ > 1)
      throw PlanError(fmt::format("{}:{}: a second YAML document (after '---'): a plan is one document, and only the "
                                  "first would be read; put each plan in a file of its own",
                                  source_, m.line + 1));
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(m);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(m);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void open(const YAML::Mark& m) {
    if (++depth_ > io::kMaxJsonDepth) too_deep(source_, m.line + 1, "");
  }
  const std::string& source_;
  int depth_ = 0, documents_ = 0;
};

void check_yaml_depth(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  YamlDepthGuard guard(source);
  while (parser.HandleNextDocument(guard)) {
  }
}

nlohmann::json yaml_to_json(const YAML::Node& n, const std::string& path, std::map<std::string, int>& lines,
                            YamlBudget& budget, int depth = 0) {
  if (++budget.nodes > kMaxPlanNodes)
    throw PlanError(fmt::format("{}:{}: {}the plan expands to more than {} values (nested YAML aliases?); a plan "
                                "lists models, tasks, shots and seeds and needs far fewer",
                                budget.source, n.Mark().line + 1, path.empty() ? "" : path + ": ", kMaxPlanNodes));
  // Aliases nest what they name: a chain of them, or one inside the collection it names,
  // is deeper than the text.
  if (depth > io::kMaxJsonDepth && (n.IsSequence() || n.IsMap()))
    too_deep(budget.source, n.Mark().line + 1, " once its YAML aliases are expanded (an alias inside what it names?)");
  lines[path] = n.Mark().line + 1;
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      auto a = nlohmann::json::array();
      for (size_t i = 0; i < n.size(); ++i)
        a.push_back(yaml_to_json(n[i], fmt::format("{}[{}]", path, i), lines, budget, depth + 1));
      return a;
    }
    case YAML::NodeType::Map: {
      auto o = nlohmann::json::object();
      for (const auto& kv : n) {
        const std::string key = kv.first.as<std::string>();
        // A key given twice: which value is meant cannot be known (yaml-cpp keeps both and a
        // map would keep the last, dropping the first without a word).
        if (o.contains(key))
          throw PlanError(fmt::format("{}:{}: the key '{}' appears twice in one mapping{}; give it once",
                                      budget.source, kv.first.Mark().line + 1, io::excerpt(key, 80),
                                      path.empty() ? "" : " (under " + path + ")"));
        o[key] = yaml_to_json(kv.second, path.empty() ? key : path + "." + key, lines, budget, depth + 1);
      }
      return o;
    }
    case YAML::NodeType::Scalar:
      return yaml_scalar(n);
    default:
      return nullptr;
  }
}

// ---------------------------------------------------------------------------------------
// Validation: one error names the file (and line for YAML), the key path, the value and
// what is expected.

class Checker {
 public:
  Checker(std::string source, std::string base_dir, const std::map<std::string, int>* lines)
      : source_(std::move(source)), base_(std::move(base_dir)), lines_(lines), listed_(source_, "plan") {}

  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    std::string where = source_;
    if (lines_) {
      auto it = lines_->find(path);
      if (it != lines_->end()) where += ":" + std::to_string(it->second);
    }
    throw PlanError(fmt::format("{}: {}{}", where, path.empty() ? "" : path + ": ", msg));
  }

  /// `also`: keys a sweep's own plan.json adds (digests, pinned checkpoints), accepted but
  /// not offered in messages: a plan written by hand does not need them.
  const nlohmann::json& object(const nlohmann::json& j, const std::string& path, std::initializer_list<const char*> allowed,
                               std::initializer_list<const char*> also = {}) const {
    if (!j.is_object())
      fail(path, fmt::format("{} is not a mapping (expected keys: {})", io::json_excerpt(j), join(allowed)));
    const auto in = [](std::initializer_list<const char*> l, const std::string& k) {
      return std::any_of(l.begin(), l.end(), [&](const char* a) { return k == a; });
    };
    for (const auto& kv : j.items())
      if (!in(allowed, kv.key()) && !in(also, kv.key()))
        fail(sub(path, kv.key()), fmt::format("unknown key (expected one of: {})", join(allowed)));
    return j;
  }
  std::string string(const nlohmann::json& j, const std::string& path) const {
    if (!j.is_string() || j.get<std::string>().empty())
      fail(path, fmt::format("{} is not a non-empty string", io::json_excerpt(j)));
    return j.get<std::string>();
  }
  int64_t integer(const nlohmann::json& j, const std::string& path, int64_t min, const char* what) const {
    if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX)) ||
        j.get<int64_t>() < min)
      fail(path, fmt::format("{} is not {}", io::json_excerpt(j), what));
    return j.get<int64_t>();
  }
  double number(const nlohmann::json& j, const std::string& path, double min, double max, const char* what) const {
    if (!j.is_number() || j.get<double>() < min || j.get<double>() > max)
      fail(path, fmt::format("{} is not {}", io::json_excerpt(j), what));
    return j.get<double>();
  }
  /// An existing file or directory, relative to the plan's directory; returns the absolute path.
  std::string existing(const nlohmann::json& j, const std::string& path, const char* what) const {
    const std::string written = string(j, path), p = resolve(written);
    if (!fs::exists(p))
      fail(path, fmt::format("{} does not exist ({}: {}){}", io::json_excerpt(j), what, p, listed_.elsewhere(written)));
    if (const std::string why = listed_.ambiguity(written, p); !why.empty()) fail(path, why);
    if (const std::string why = io::input_type_problem(p, io::InputKind::file_or_directory); !why.empty())
      fail(path, fmt::format("{} {}", p, why));
    return p;
  }
  /// The SHA-256 of a file the jobs read: its identity in plan.json and in every record.
  std::string digest(const std::string& file, const std::string& path) const {
    try {
      return io::sha256_file(file);
    } catch (const std::exception& e) {
      fail(path, fmt::format("cannot read {}: {}", file, e.what()));
    }
  }
  std::string resolve(const std::string& p) const {
    fs::path fp(p);
    return (fp.is_absolute() ? fp : fs::path(base_) / fp).lexically_normal().string();
  }
  static std::string sub(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
  static std::string at(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }

 private:
  static std::string join(std::initializer_list<const char*> l) {
    std::string s;
    for (const char* a : l) s += (s.empty() ? "" : ", ") + std::string(a);
    return s;
  }
  std::string source_, base_;
  const std::map<std::string, int>* lines_;
  io::ListedPaths listed_;  // a plan reached through a link: its relative paths' second meaning
};

const nlohmann::json& required(const Checker& c, const nlohmann::json& obj, const std::string& path, const char* key,
                               const char* what) {
  if (!obj.contains(key)) c.fail(path, fmt::format("missing key \"{}\" ({})", key, what));
  return obj.at(key);
}

void check_name(const Checker& c, const std::string& name, const std::string& path) {
  if (name.find('|') != std::string::npos)
    c.fail(path, fmt::format("\"{}\" contains '|' (the job key separator); choose another name", name));
  if (const size_t at = io::first_control_char(name); at != std::string::npos)
    c.fail(path, fmt::format("\"{}\" holds a control character ({} at position {}): names are printed into the "
                             "lines of tables and job lists; choose another name",
                             io::printable(name), io::describe_control_char(name, at), at + 1));
}

/// A model path to the directory its jobs load, once per sweep: a run's newest complete
/// checkpoint (each job taking "the newest" when it starts would mix steps while the run
/// goes on), or the checkpoint a normalised plan names (`pinned`). A run still in progress is
/// refused: its newest checkpoint is not its model. The weights' SHA-256 is taken here (a
/// checkpoint's files are checked against its state.json on the way).
void resolve_checkpoint(const Checker& c, PlanModel& m, const std::string& path, const std::string& pinned) {
  io::ResolvedModel r;
  try {
    r = io::resolve_model(pinned.empty() ? m.path : pinned);
    m.weights_sha256 = io::model_weights_sha256(r);
  } catch (const io::InputError& e) {
    const std::string what = e.what();
    c.fail(path, what.find("no complete checkpoint") != std::string::npos
                     ? fmt::format("{} (expected a model directory, a pretrain run or \"random\")", what)
                     : what);
  }
  m.checkpoint = r.dir;
  m.checkpoint_step = r.step;
  if (!pinned.empty()) return;
  const std::string why =
      io::unfinished_run_reason(r, m.path, fmt::format("name a checkpoint directory (\"{}\") to evaluate that step", r.dir));
  if (!why.empty()) c.fail(path, why);
}

/// A value a normalised plan (DIR/plan.json) records about an input, read back: it must be
/// what the input is now, or the plan describes other inputs than the ones on disk.
void check_recorded(const Checker& c, const nlohmann::json& j, const char* key, const nlohmann::json& now,
                    const std::string& path, const std::string& what) {
  if (!j.contains(key)) return;
  const auto& rec = j[key];
  if (rec == now || (rec.is_null() && now.is_string() && now.get<std::string>().empty())) return;
  c.fail(Checker::sub(path, key), fmt::format("the plan records {} but {} is now {}: the input changed since the plan was "
                                              "written; remove \"{}\" to take the input as it is now",
                                              io::json_excerpt(rec, 80), what, io::json_excerpt(now, 80), key));
}

PlanModel parse_model(const Checker& c, const nlohmann::json& j, const std::string& path) {
  // checkpoint, checkpoint_step, weights_sha256 and config_sha256 are what a sweep's own
  // plan.json records: a plan.json read back pins the same checkpoint and checks the digests.
  c.object(j, path, {"name", "path", "config", "group", "arm", "replicate"},
           {"checkpoint", "checkpoint_step", "weights_sha256", "config_sha256"});
  PlanModel m;
  m.name = c.string(required(c, j, path, "name", "the model's display name"), Checker::sub(path, "name"));
  check_name(c, m.name, Checker::sub(path, "name"));
  const auto& pj = required(c, j, path, "path", "a model directory, a pretrain run, or \"random\"");
  if (c.string(pj, Checker::sub(path, "path")) == "random") {
    m.path = "random";
    m.config = "logo";
    if (j.contains("config")) {
      const std::string cfg = c.string(j["config"], Checker::sub(path, "config"));
      m.config = cfg == "logo" || cfg == "dnabert"
                     ? cfg
                     : c.existing(j["config"], Checker::sub(path, "config"), "expected logo, dnabert or a config.json");
      if (m.config != "logo" && m.config != "dnabert") m.config_sha256 = c.digest(m.config, Checker::sub(path, "config"));
    }
    // A built-in architecture's identity is its name: records of a random "logo" model are
    // then never taken for (or averaged with) those of a random "dnabert" one of that name.
    if (m.config == "logo" || m.config == "dnabert") m.config_sha256 = io::sha256_hex("genemask built-in config: " + m.config);
    for (const char* key : {"checkpoint", "checkpoint_step", "weights_sha256"})
      if (j.contains(key) && !j[key].is_null())
        c.fail(Checker::sub(path, key), "only a model read from a directory has one (this one is \"random\")");
    check_recorded(c, j, "config_sha256", m.config_sha256, path, "the config file's SHA-256");
  } else {
    m.path = c.existing(pj, Checker::sub(path, "path"), "expected a model directory, a pretrain run, or \"random\"");
    std::string pinned;
    if (j.contains("checkpoint") && !j["checkpoint"].is_null())
      pinned = c.existing(j["checkpoint"], Checker::sub(path, "checkpoint"), "the checkpoint this plan pins");
    resolve_checkpoint(c, m, Checker::sub(path, "path"), pinned);
    if (j.contains("config"))
      c.fail(Checker::sub(path, "config"), "only used with path \"random\" (a model directory has its own config.json)");
    check_recorded(c, j, "checkpoint_step", m.checkpoint_step >= 0 ? nlohmann::json(m.checkpoint_step) : nlohmann::json(),
                   path, "the checkpoint's step");
    check_recorded(c, j, "weights_sha256", m.weights_sha256, path, "the weights' SHA-256");
    if (j.contains("config_sha256") && !j["config_sha256"].is_null())
      c.fail(Checker::sub(path, "config_sha256"), "only a \"random\" model has one");
  }
  if (j.contains("group")) {
    if (!j["group"].is_string())
      c.fail(Checker::sub(path, "group"), fmt::format("{} is not a string", io::json_excerpt(j["group"])));
    m.group = j["group"].get<std::string>();
    m.group_given = true;
    check_name(c, m.group, Checker::sub(path, "group"));
  }
  if (j.contains("arm") || j.contains("replicate")) {
    if (!j.contains("arm") || !j.contains("replicate"))
      c.fail(Checker::sub(path, j.contains("arm") ? "arm" : "replicate"),
             "\"arm\" and \"replicate\" go together: a replicate is one pretraining run (e.g. its seed) of an arm "
             "(the strategy)");
    m.arm = c.string(j["arm"], Checker::sub(path, "arm"));
    check_name(c, m.arm, Checker::sub(path, "arm"));
    m.replicate = c.integer(j["replicate"], Checker::sub(path, "replicate"), 0, "an integer >= 0 (e.g. the pretraining seed)");
  }
  return m;
}

/// The fixed train file of one shot in the released layout: DIR/<shot>/train.tsv, or the
/// single train*.tsv there (Splice-40: train_splice40_<N>.tsv).
std::string shot_train_file(const Checker& c, const std::string& dir, int64_t shot, const std::string& path) {
  const fs::path d = fs::path(dir) / std::to_string(shot);
  if (fs::is_regular_file(d / "train.tsv")) return (d / "train.tsv").string();
  std::vector<std::string> found;
  if (fs::is_directory(d))
    for (const auto& e : fs::directory_iterator(d)) {
      const std::string f = e.path().filename().string();
      if (e.is_regular_file() && f.rfind("train", 0) == 0 && f.size() > 4 && f.substr(f.size() - 4) == ".tsv")
        found.push_back(e.path().string());
    }
  if (found.size() == 1) return found[0];
  if (found.empty())
    c.fail(path, fmt::format("\"{}\" has no train.tsv or train*.tsv for {} shots (the released few-shot layout is "
                             "DIR/<shots>/train.tsv; remove {} from shots or add the file)",
                             d.string(), shot, shot));
  std::sort(found.begin(), found.end());
  c.fail(path, fmt::format("\"{}\" has {} train*.tsv files ({}, ...): name the one to use train.tsv", d.string(),
                           found.size(), found[0]));
}

PlanTask parse_task(const Checker& c, const nlohmann::json& j, const std::string& path,
                    const std::vector<int64_t>& shots) {
  // shot_train and the *_sha256 are what a sweep's own plan.json records: read back, they
  // must be what the files are now.
  c.object(j, path, {"name", "train", "test", "dir"}, {"shot_train", "train_sha256", "test_sha256", "shot_train_sha256"});
  PlanTask t;
  t.name = c.string(required(c, j, path, "name", "the task's name"), Checker::sub(path, "name"));
  check_name(c, t.name, Checker::sub(path, "name"));
  if (j.contains("dir")) {
    if (j.contains("train"))
      c.fail(Checker::sub(path, "train"), "give either dir (fixed shot files) or train (sampled shots), not both");
    t.dir = c.existing(j["dir"], Checker::sub(path, "dir"), "expected a few-shot task directory");
    if (!fs::is_directory(t.dir))
      c.fail(Checker::sub(path, "dir"), fmt::format("{} is not a directory", io::json_excerpt(j["dir"])));
    if (j.contains("test")) {
      t.test = c.existing(j["test"], Checker::sub(path, "test"), "expected the test table");
    } else {
      for (const char* f : {"test.tsv", "dev.tsv"})
        if (fs::is_regular_file(fs::path(t.dir) / f)) {
          // Both: which one the tables are of is the user's choice, as with two train*.tsv.
          if (!t.test.empty())
            c.fail(Checker::sub(path, "dir"), fmt::format("\"{}\" has both test.tsv and dev.tsv: give \"test\" "
                                                          "explicitly (the table to score on)",
                                                          t.dir));
          t.test = (fs::path(t.dir) / f).string();
        }
      if (t.test.empty())
        c.fail(Checker::sub(path, "dir"), fmt::format("\"{}\" has no test.tsv or dev.tsv (give \"test\" explicitly)", t.dir));
    }
    for (int64_t s : shots) t.shot_train[s] = shot_train_file(c, t.dir, s, Checker::sub(path, "dir"));
  } else {
    t.train = c.existing(required(c, j, path, "train", "or \"dir\": a training table, or the few-shot task directory"),
                         Checker::sub(path, "train"), "expected a training table");
    t.test = c.existing(required(c, j, path, "test", "the test table"), Checker::sub(path, "test"),
                        "expected a test table");
  }
  t.test_sha256 = c.digest(t.test, Checker::sub(path, "test"));
  if (!t.train.empty()) t.train_sha256 = c.digest(t.train, Checker::sub(path, "train"));
  nlohmann::json shot_files = nlohmann::json::object(), shot_digests = nlohmann::json::object();
  for (const auto& [s, file] : t.shot_train) {
    t.shot_train_sha256[s] = c.digest(file, Checker::sub(path, "dir"));
    shot_files[std::to_string(s)] = file;
    shot_digests[std::to_string(s)] = t.shot_train_sha256[s];
  }
  check_recorded(c, j, "test_sha256", t.test_sha256, path, "the test table's SHA-256");
  check_recorded(c, j, "train_sha256", t.train.empty() ? nlohmann::json() : nlohmann::json(t.train_sha256), path,
                 "the training table's SHA-256");
  // A plan.json lists the shot files of its own shots: those still planned must be the same.
  for (const char* key : {"shot_train", "shot_train_sha256"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_object()) c.fail(Checker::sub(path, key), fmt::format("{} is not a mapping", io::json_excerpt(j[key])));
    const auto& now = std::string(key) == "shot_train" ? shot_files : shot_digests;
    for (const auto& [shot, v] : j[key].items())
      if (now.contains(shot) && now[shot] != v)
        c.fail(Checker::sub(Checker::sub(path, key), shot),
               fmt::format("the plan records {} but it is now {}: the few-shot files changed since the plan was written; "
                           "remove \"{}\" to take them as they are now",
                           io::json_excerpt(v, 80), io::json_excerpt(now[shot], 80), key));
  }
  return t;
}

/// The jobs a plan expands to, and the run directory names they get, must fit: at most
/// kMaxPlanJobs jobs, and names within the file-name limit (a long model name would
/// otherwise pass here and fail every job with "File name too long").
void check_expansion(const Checker& c, const Plan& p) {
  uint64_t jobs = 1;
  for (const uint64_t n : {p.models.size(), p.tasks.size(), p.shots.size(), p.seeds.size()}) {
    if (n > 0 && jobs > kMaxPlanJobs / n) {
      jobs = kMaxPlanJobs + 1;
      break;
    }
    jobs *= n;
  }
  if (jobs > kMaxPlanJobs)
    c.fail("", fmt::format("{} models x {} tasks x {} shots x {} seeds is more than the {} jobs a sweep may run; split "
                           "it into several plans",
                           p.models.size(), p.tasks.size(), p.shots.size(), p.seeds.size(), kMaxPlanJobs));
  size_t shot_digits = 0, seed_digits = 0;
  for (int64_t s : p.shots) shot_digits = std::max(shot_digits, std::to_string(s).size());
  for (uint64_t s : p.seeds) seed_digits = std::max(seed_digits, std::to_string(s).size());
  size_t longest_task = 0;
  for (const auto& t : p.tasks) longest_task = std::max(longest_task, safe_name(t.name).size());
  size_t longest_model = 0;
  for (const auto& m : p.models) longest_model = std::max(longest_model, safe_name(m.name).size());
  const size_t fixed = 6 + shot_digits + seed_digits;  // three "__" separators
  auto too_long = [&](const std::string& path, const std::string& name, size_t length) {
    c.fail(path, fmt::format("\"{}\" ({} bytes) makes run directory names up to {} bytes long, over the file-name "
                             "limit of {}; shorten the model or task name",
                             io::excerpt(name, 40), name.size(), length, kMaxRunDirName));
  };
  for (size_t i = 0; i < p.models.size(); ++i) {
    const size_t length = safe_name(p.models[i].name).size() + longest_task + fixed;
    if (length > kMaxRunDirName) too_long(Checker::sub(Checker::at("models", i), "name"), p.models[i].name, length);
  }
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const size_t length = longest_model + safe_name(p.tasks[i].name).size() + fixed;
    if (length > kMaxRunDirName) too_long(Checker::sub(Checker::at("tasks", i), "name"), p.tasks[i].name, length);
  }
  // Names that differ can still join into one run directory: model "a__b" with task "c" and
  // model "a" with task "b__c" both make runs/a__b__c__SHOTS__SEED, where two jobs would
  // write over each other's outputs.
  std::map<std::string, std::pair<size_t, size_t>> dirs;
  for (size_t i = 0; i < p.models.size(); ++i)
    for (size_t k = 0; k < p.tasks.size(); ++k) {
      const auto [it, fresh] =
          dirs.emplace(safe_name(p.models[i].name) + "__" + safe_name(p.tasks[k].name), std::make_pair(i, k));
      if (fresh) continue;
      const auto& [i0, k0] = it->second;
      c.fail(Checker::sub(Checker::at("models", i), "name"),
             fmt::format("model \"{}\" with task \"{}\" and model \"{}\" with task \"{}\" give the same run "
                         "directories (runs/{}__SHOTS__SEED); rename one so that the names hold no \"__\"",
                         p.models[i0].name, p.tasks[k0].name, p.models[i].name, p.tasks[k].name, it->first));
    }
}

template <class T>
std::vector<T> parse_list(const Checker& c, const nlohmann::json& j, const std::string& path, int64_t min,
                          const char* what) {
  if (!j.is_array() || j.empty()) c.fail(path, fmt::format("{} is not a non-empty list of {}", io::json_excerpt(j), what));
  std::vector<T> out;
  for (size_t i = 0; i < j.size(); ++i) {
    T v{};
    if constexpr (std::is_same_v<T, uint64_t>) {  // seeds: all of uint64_t, as `finetune --seed` takes them
      if (!j[i].is_number_unsigned() || j[i].get<uint64_t>() < static_cast<uint64_t>(min))
        c.fail(Checker::at(path, i), fmt::format("{} is not {} (at most 18446744073709551615)", io::json_excerpt(j[i]),
                                                 what));
      v = j[i].get<uint64_t>();
    } else {
      v = static_cast<T>(c.integer(j[i], Checker::at(path, i), min, what));
    }
    if (std::find(out.begin(), out.end(), v) != out.end())
      c.fail(Checker::at(path, i), fmt::format("{} appears twice", io::json_excerpt(j[i])));
    out.push_back(v);
  }
  return out;
}

}  // namespace

bool Plan::in_grid(const std::string& model, const std::string& task, int64_t n) const {
  return grid_given && std::any_of(models.begin(), models.end(), [&](const PlanModel& m) { return m.name == model; }) &&
         std::any_of(tasks.begin(), tasks.end(), [&](const PlanTask& t) { return t.name == task; }) &&
         std::find(shots.begin(), shots.end(), n) != shots.end();
}

Plan plan_from_json(const nlohmann::json& doc, const std::string& source, const std::string& base_dir,
                    const std::map<std::string, int>* lines) {
  Checker c(source, base_dir, lines);
  // "format", "version" and "source" head a sweep's own normalised plan.json, which is a plan
  // like any other (it pins the checkpoints and inputs it was made from).
  c.object(doc, "", {"models", "tasks", "shots", "seeds", "retries", "threads_per_worker", "device", "ranks_per_gpu",
                     "finetune"},
           {"format", "version", "source"});
  if (doc.contains("format") && doc["format"] != "genemask-sweep-plan")
    c.fail("format", fmt::format("{} is not \"genemask-sweep-plan\"", io::json_excerpt(doc["format"])));
  if (doc.contains("version") && doc["version"] != 1)
    c.fail("version", fmt::format("{} is not a plan version this genemask reads (1)", io::json_excerpt(doc["version"])));
  Plan p;
  p.source = source;
  // A sweep's own plan.json leaves the precision out for fp32 (finetune_to_json): read back,
  // its absence means fp32, not the default of a plan written by hand (auto).
  if (doc.contains("format")) p.finetune.precision = "fp32";
  if (doc.contains("shots")) p.shots = parse_list<int64_t>(c, doc["shots"], "shots", 1, "a positive integer");
  if (doc.contains("seeds")) {
    const auto& s = doc["seeds"];
    if (s.is_number_integer()) {  // n = seeds 1..n
      p.seeds.clear();
      const int64_t n = c.integer(s, "seeds", 1, "a positive count or a list of seeds");
      if (n > kMaxPlanSeeds)
        c.fail("seeds", fmt::format("{} seeds is more than the {} a plan may have (the paper runs 10)", n, kMaxPlanSeeds));
      for (int64_t i = 1; i <= n; ++i) p.seeds.push_back(static_cast<uint64_t>(i));
    } else {
      p.seeds = parse_list<uint64_t>(c, s, "seeds", 0, "a non-negative integer");
      if (p.seeds.size() > static_cast<uint64_t>(kMaxPlanSeeds))
        c.fail("seeds", fmt::format("{} seeds is more than the {} a plan may have (the paper runs 10)", p.seeds.size(),
                                    kMaxPlanSeeds));
    }
  }
  const auto& models = required(c, doc, "", "models", "a list of {name, path[, config, group]}");
  if (!models.is_array() || models.empty())
    c.fail("models",
           fmt::format("{} is not a non-empty list of {{name, path[, config, group]}}", io::json_excerpt(models)));
  // Names must differ, also after safe_name (they name the run directories).
  std::map<std::string, std::string> safe;
  auto check_unique = [&](const std::string& path, const std::string& name) {
    auto [it, fresh] = safe.emplace(safe_name(name), name);
    if (!fresh)
      c.fail(Checker::sub(path, "name"), it->second == name
                                             ? fmt::format("\"{}\" appears twice", name)
                                             : fmt::format("\"{}\" and \"{}\" give the same run directory name \"{}\"",
                                                           it->second, name, it->first));
  };
  for (size_t i = 0; i < models.size(); ++i) {
    const std::string path = Checker::at("models", i);
    p.models.push_back(parse_model(c, models[i], path));
    const std::string& name = p.models.back().name;
    check_unique(path, name);
  }
  // An arm's replicates are distinct, and an arm is named apart from the models (a --baseline
  // names either).
  std::map<std::pair<std::string, int64_t>, size_t> replicates;
  for (size_t i = 0; i < p.models.size(); ++i) {
    const auto& m = p.models[i];
    if (m.arm.empty()) continue;
    if (auto [it, fresh] = replicates.emplace(std::make_pair(m.arm, m.replicate), i); !fresh)
      c.fail(Checker::sub(Checker::at("models", i), "replicate"),
             fmt::format("{} of arm \"{}\" is also models[{}] (\"{}\"): each replicate of an arm is one model", m.replicate,
                         m.arm, it->second, p.models[it->second].name));
    for (size_t k = 0; k < p.models.size(); ++k)
      if (p.models[k].name == m.arm)
        c.fail(Checker::sub(Checker::at("models", i), "arm"),
               fmt::format("\"{}\" is also the name of models[{}]: name an arm apart from the models", m.arm, k));
  }
  const auto& tasks = required(c, doc, "", "tasks", "a list of {name, train, test} or {name, dir}");
  if (!tasks.is_array() || tasks.empty())
    c.fail("tasks", fmt::format("{} is not a non-empty list of {{name, train, test}} or {{name, dir}}",
                                io::json_excerpt(tasks)));
  safe.clear();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::string path = Checker::at("tasks", i);
    p.tasks.push_back(parse_task(c, tasks[i], path, p.shots));
    const std::string& name = p.tasks.back().name;
    check_unique(path, name);
  }
  check_expansion(c, p);
  if (doc.contains("retries")) p.retries = static_cast<int>(c.integer(doc["retries"], "retries", 0, "an integer >= 0"));
  if (doc.contains("threads_per_worker"))
    p.threads_per_worker = static_cast<int>(
        c.integer(doc["threads_per_worker"], "threads_per_worker", 0, "an integer >= 0 (0 = all cores)"));
  if (doc.contains("device")) {
    p.device = c.string(doc["device"], "device");
    if (p.device != "cpu" && p.device != "cuda")
      c.fail("device", fmt::format("{} is not cpu or cuda", io::json_excerpt(doc["device"])));
  }
  if (doc.contains("ranks_per_gpu"))
    p.ranks_per_gpu = static_cast<int>(c.integer(doc["ranks_per_gpu"], "ranks_per_gpu", 1, "an integer >= 1"));
  if (doc.contains("finetune")) {
    const auto& f = c.object(doc["finetune"], "finetune",
                             {"lr", "epochs", "batch", "dropout", "warmup_fraction", "weight_decay", "precision"});
    auto& o = p.finetune;
    if (f.contains("lr")) o.lr = c.number(f["lr"], "finetune.lr", 0, 1e9, "a learning rate >= 0 (0 = paper regime)");
    if (f.contains("epochs")) o.epochs = c.integer(f["epochs"], "finetune.epochs", 0, "an integer >= 0 (0 = paper regime)");
    if (f.contains("batch")) o.batch = c.integer(f["batch"], "finetune.batch", 0, "an integer >= 0 (0 = paper regime)");
    if (f.contains("dropout")) o.dropout = c.number(f["dropout"], "finetune.dropout", 0, 0.999, "a probability in [0, 1)");
    if (f.contains("warmup_fraction"))
      o.warmup_fraction = c.number(f["warmup_fraction"], "finetune.warmup_fraction", 0, 1, "a fraction in [0, 1]");
    if (f.contains("weight_decay"))
      o.weight_decay = c.number(f["weight_decay"], "finetune.weight_decay", 0, 1e9, "a number >= 0");
    if (f.contains("precision")) {
      o.precision = c.string(f["precision"], "finetune.precision");
      if (o.precision != "fp32" && o.precision != "bf16" && o.precision != "auto")
        c.fail("finetune.precision", fmt::format("{} is not fp32, bf16 or auto", io::json_excerpt(f["precision"])));
    }
  }
  return p;
}

Plan read_plan_order(const std::string& path) {
  io::check_input_type(path);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw io::InputError(path, fmt::format("cannot open the plan ({}); check the path (the sweep writes DIR/plan.json)",
                                           io::open_error_reason(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = io::parse_json(ss.str(), path, "the sweep's plan.json is JSON");
  Plan p;
  p.source = path;
  const bool sweeps_own = j.is_object() && j.value("format", "") == "genemask-sweep-plan";
  // A sweep's own plan.json records the SHA-256 of every input (plan_to_json): the report
  // holds the records' against them.
  const auto digest = [&](const nlohmann::json& e, const char* key) {
    return sweeps_own && e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
  };
  auto names = [&](const char* key, bool models) {
    if (!j.is_object() || !j.contains(key)) return;
    if (!j[key].is_array()) throw io::InputError(path, fmt::format("\"{}\" must be an array", key));
    for (const auto& e : j[key]) {
      PlanModel pm;
      if (e.is_string()) {
        pm.name = e.get<std::string>();
      } else if (e.is_object() && e.contains("name") && e["name"].is_string()) {
        pm.name = e["name"].get<std::string>();
        if (e.contains("group") && e["group"].is_string()) {
          pm.group = e["group"].get<std::string>();
          pm.group_given = true;
        }
        if (e.contains("path") && e["path"].is_string()) pm.path = e["path"].get<std::string>();
        if (e.contains("checkpoint") && e["checkpoint"].is_string()) pm.checkpoint = e["checkpoint"].get<std::string>();
        if (e.contains("arm") && e["arm"].is_string() && e.contains("replicate") && e["replicate"].is_number_integer() &&
            e["replicate"].get<int64_t>() >= 0) {
          pm.arm = e["arm"].get<std::string>();
          pm.replicate = e["replicate"].get<int64_t>();
        }
        pm.weights_sha256 = digest(e, "weights_sha256");
        pm.config_sha256 = digest(e, "config_sha256");
      } else {
        throw io::InputError(path, fmt::format("an entry of \"{}\" is {}, expected a name or an object with \"name\"",
                                               key, io::json_excerpt(e)));
      }
      if (models) {
        p.models.push_back(std::move(pm));
      } else {
        PlanTask t;
        t.name = pm.name;
        if (e.is_object()) {
          t.test_sha256 = digest(e, "test_sha256");
          t.train_sha256 = digest(e, "train_sha256");
          // The released few-shot layout: every seed fine-tunes on one fixed N-shot file
          // (Table 1 says so under the table).
          if (e.contains("dir") && e["dir"].is_string()) t.dir = e["dir"].get<std::string>();
          if (sweeps_own && e.contains("shot_train_sha256") && e["shot_train_sha256"].is_object())
            for (const auto& [shots, d] : e["shot_train_sha256"].items())
              if (const auto n = io::parse_decimal_i64(shots); n && d.is_string()) t.shot_train_sha256[*n] = d.get<std::string>();
        }
        p.tasks.push_back(std::move(t));
      }
    }
  };
  names("models", true);
  names("tasks", false);
  if (sweeps_own && j.contains("finetune") && j["finetune"].is_object()) p.recorded_finetune = j["finetune"];
  // The grid the sweep ran: every seed of every shot count, for every model and task.
  const auto integers = [&](const char* key) {
    if (!sweeps_own || !j.contains(key) || !j[key].is_array() || j[key].empty()) return false;
    return std::all_of(j[key].begin(), j[key].end(), [](const nlohmann::json& v) { return v.is_number_unsigned(); });
  };
  if (integers("shots") && integers("seeds")) {
    p.shots.clear();
    p.seeds.clear();
    for (const auto& v : j["shots"]) p.shots.push_back(v.get<int64_t>());
    for (const auto& v : j["seeds"]) p.seeds.push_back(v.get<uint64_t>());
    p.grid_given = true;
  }
  return p;
}

Plan load_plan(const std::string& path) {
  try {
    io::check_input_type(path);
  } catch (const io::InputError& e) {
    throw PlanError(e.what());
  }
  errno = 0;
  std::ifstream in(path);
  if (!in)
    throw PlanError(fmt::format("{}: cannot open the plan ({}; does the file exist?)", path, io::open_error_reason(errno)));
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (!ec && bytes > kMaxPlanBytes)
    throw PlanError(fmt::format("{}: the plan is {} bytes, more than the {} a plan may have: is this the plan file?",
                                path, bytes, kMaxPlanBytes));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string ext = fs::path(path).extension().string();
  const std::string base = fs::absolute(fs::path(path)).parent_path().string();
  if (ext == ".yaml" || ext == ".yml") {
    std::map<std::string, int> lines;
    nlohmann::json doc;
    try {
      YamlBudget budget{path};
      check_yaml_depth(text, path);
      doc = yaml_to_json(YAML::Load(text), "", lines, budget);
    } catch (const YAML::Exception& e) {
      throw PlanError(fmt::format("{}:{}: not valid YAML: {}", path, e.mark.line + 1, e.msg));
    }
    return plan_from_json(doc, path, base, &lines);
  }
  io::JsonParse parsed = io::try_parse_json(text);
  if (!parsed.ok())
    throw PlanError(fmt::format("{}:{}: {} (YAML plans need a .yaml or .yml name)", path, parsed.line, parsed.error));
  return plan_from_json(parsed.value, path, base);
}

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json j;
  j["format"] = "genemask-sweep-plan";
  j["version"] = 1;
  j["source"] = p.source;
  for (const auto& m : p.models) {
    nlohmann::json o{{"name", m.name}, {"path", m.path}, {"group", m.group}};
    if (!m.arm.empty()) o["arm"] = m.arm, o["replicate"] = m.replicate;
    if (m.path == "random") {
      o["config"] = m.config;
      if (!m.config_sha256.empty()) o["config_sha256"] = m.config_sha256;
    } else {
      o["checkpoint"] = m.checkpoint;
      o["checkpoint_step"] = m.checkpoint_step >= 0 ? nlohmann::json(m.checkpoint_step) : nlohmann::json();
      o["weights_sha256"] = m.weights_sha256;
    }
    j["models"].push_back(o);
  }
  for (const auto& t : p.tasks) {
    nlohmann::json o{{"name", t.name}, {"test", t.test}, {"test_sha256", t.test_sha256}};
    if (t.dir.empty()) {
      o["train"] = t.train;
      o["train_sha256"] = t.train_sha256;
    } else {
      o["dir"] = t.dir;
      for (const auto& [s, f] : t.shot_train) o["shot_train"][std::to_string(s)] = f;
      for (const auto& [s, d] : t.shot_train_sha256) o["shot_train_sha256"][std::to_string(s)] = d;
    }
    j["tasks"].push_back(o);
  }
  j["shots"] = p.shots;
  j["seeds"] = p.seeds;
  j["retries"] = p.retries;
  j["threads_per_worker"] = p.threads_per_worker;
  j["device"] = p.device;
  j["ranks_per_gpu"] = p.ranks_per_gpu;
  j["finetune"] = finetune_to_json(p.finetune);
  return j;
}

nlohmann::json finetune_to_json(const PlanFinetune& f) {
  nlohmann::json j = {{"lr", f.lr},           {"epochs", f.epochs}, {"batch", f.batch}, {"dropout", f.dropout},
                      {"warmup_fraction", f.warmup_fraction}, {"weight_decay", f.weight_decay}};
  // Not for fp32, so that the plans of earlier sweeps (fp32, the default then) read the same;
  // auto, the default now, is written, and so differs from them (compare_plans).
  if (f.precision != "fp32") j["precision"] = f.precision;
  return j;
}

std::string safe_name(const std::string& s) {
  std::string out = s;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_') ch = '_';
  return out;
}

std::vector<Job> expand_jobs(const Plan& p, const std::string& out_dir) {
  std::vector<int64_t> shots = p.shots;
  std::stable_sort(shots.begin(), shots.end(), std::greater<>());  // long jobs first
  std::vector<Job> jobs;
  for (int64_t s : shots)
    for (const auto& m : p.models)
      for (const auto& t : p.tasks)
        for (uint64_t seed : p.seeds) {
          Job j;
          j.key = results::job_key(m.name, t.name, s, seed);
          j.model = m.name;
          j.group = m.group;
          j.arm = m.arm;
          j.replicate = m.replicate;
          j.task = t.name;
          j.shots = s;
          j.seed = seed;
          j.model_path = m.checkpoint.empty() ? m.path : m.checkpoint;
          j.checkpoint_step = m.checkpoint_step;
          j.config = m.config;
          j.test = t.test;
          if (t.dir.empty()) {
            j.train = t.train;
            j.train_sha256 = t.train_sha256;
            j.sample_shots = s;
          } else {
            j.train = t.shot_train.at(s);
            j.train_sha256 = t.shot_train_sha256.count(s) ? t.shot_train_sha256.at(s) : "";
            j.sample_shots = 0;
          }
          j.test_sha256 = t.test_sha256;
          j.model_sha256 = m.path == "random" ? m.config_sha256 : m.weights_sha256;
          j.out = (fs::path(out_dir) / "runs" /
                   fmt::format("{}__{}__{}__{}", safe_name(m.name), safe_name(t.name), s, seed))
                      .string();
          j.finetune = p.finetune;
          jobs.push_back(std::move(j));
        }
  return jobs;
}

namespace {

/// One difference between a model's or task's entries of two plans, for the message.
std::string describe_change(const std::string& key, bool recorded_before, const nlohmann::json& before,
                            const nlohmann::json& now) {
  const size_t suffix = key.find("_sha256");
  if (suffix == std::string::npos)
    return fmt::format("{} {} -> {}", key, io::json_excerpt(before, 300), io::json_excerpt(now, 300));
  std::string input = key.substr(0, suffix);
  if (input == "weights") input = "the weights";
  else if (input == "test") input = "the test table";
  else if (input == "train") input = "the training table";
  else if (input == "config") input = "the config file";
  else if (input == "shot_train") input = "the few-shot training files";
  if (key.size() > suffix + 7 && key[suffix + 7] == '[')
    input = fmt::format("the {}-shot training file", key.substr(suffix + 8, key.size() - suffix - 9));
  if (!recorded_before)
    return fmt::format("the earlier plan recorded no SHA-256 of {} (a plan.json of an earlier genemask): its results "
                       "cannot be checked against the inputs now",
                       input);
  const auto short_hex = [](const nlohmann::json& v) {
    return v.is_string() ? v.get<std::string>().substr(0, 12) + "..." : io::json_excerpt(v, 40);
  };
  return fmt::format("the content of {} changed (SHA-256 {} -> {})", input, short_hex(before), short_hex(now));
}

}  // namespace

PlanDiff compare_plans(const nlohmann::json& old_plan, const nlohmann::json& new_plan) {
  PlanDiff d;
  auto by_name = [](const nlohmann::json& list) {
    std::map<std::string, nlohmann::json> m;
    if (list.is_array())
      for (const auto& e : list) m[e.value("name", "")] = e;
    return m;
  };
  for (const char* kind : {"models", "tasks"}) {
    const auto olds = by_name(old_plan.value(kind, nlohmann::json::array()));
    const auto news = by_name(new_plan.value(kind, nlohmann::json::array()));
    auto& changed = std::string(kind) == "models" ? d.changed_models : d.changed_tasks;
    for (const auto& [name, o] : olds) {
      auto it = news.find(name);
      const std::string what = std::string(kind).substr(0, std::string(kind).size() - 1);  // "model", "task"
      if (it == news.end()) {
        d.changes.push_back(fmt::format("{} \"{}\" was removed", what, name));
        continue;
      }
      // The group is presentation only; a task's fixed shot files may grow with new shots.
      nlohmann::json a = o, b = it->second;
      // arm and replicate too: how the report groups models, not what a job computes.
      for (auto* x : {&a, &b})
        x->erase("group"), x->erase("arm"), x->erase("replicate"), x->erase("shot_train"), x->erase("shot_train_sha256");
      if (!a.contains("checkpoint")) b.erase("checkpoint"), b.erase("checkpoint_step");  // a plan.json of before
      // A built-in architecture's digest is of its name, which is compared itself (and a
      // plan.json of before recorded none).
      const auto builtin = [](const nlohmann::json& x) {
        return x.value("config", "") == "logo" || x.value("config", "") == "dnabert";
      };
      if (builtin(b) && (builtin(a) || !a.contains("config_sha256"))) a.erase("config_sha256"), b.erase("config_sha256");
      std::vector<std::string> what_changed;
      std::set<std::string> keys;
      for (const auto& [k, v] : a.items()) keys.insert(k);
      for (const auto& [k, v] : b.items()) keys.insert(k);
      for (const auto& k : keys) {
        const nlohmann::json va = a.value(k, nlohmann::json()), vb = b.value(k, nlohmann::json());
        if (va == vb) continue;
        what_changed.push_back(describe_change(k, a.contains(k), va, vb));
      }
      for (const char* key : {"shot_train", "shot_train_sha256"}) {
        if (!o.contains(key)) continue;
        const auto now = it->second.value(key, nlohmann::json::object());
        for (const auto& [shot, v] : o.at(key).items())
          if (now.value(shot, nlohmann::json()) != v)
            what_changed.push_back(describe_change(std::string(key) + "[" + shot + "]", true, v, now.value(shot, nlohmann::json())));
      }
      if (o.contains("shot_train") && !o.contains("shot_train_sha256") && it->second.contains("shot_train_sha256"))
        what_changed.push_back(describe_change("shot_train_sha256", false, nullptr, it->second["shot_train_sha256"]));
      if (!what_changed.empty()) {
        std::string list;
        for (const auto& w : what_changed) list += (list.empty() ? "" : ", ") + w;
        d.changes.push_back(fmt::format("{} \"{}\" changed: {}", what, name, list));
        changed.insert(name);
      }
    }
  }
  for (const char* list : {"shots", "seeds"}) {
    const auto& n = new_plan.value(list, nlohmann::json::array());
    for (const auto& v : old_plan.value(list, nlohmann::json::array()))
      if (std::find(n.begin(), n.end(), v) == n.end())
        d.changes.push_back(fmt::format("{} {} was removed from {}", list, io::json_excerpt(v, 1000), list));
  }
  for (const char* key : {"finetune", "device"})
    if (old_plan.value(key, nlohmann::json()) != new_plan.value(key, nlohmann::json())) {
      d.changes.push_back(fmt::format("{} changed from {} to {}", key,
                                      io::json_excerpt(old_plan.value(key, nlohmann::json()), 1000),
                                      io::json_excerpt(new_plan.value(key, nlohmann::json()), 1000)));
      d.settings_changed = true;
    }
  return d;
}

}  // namespace genemask::sweep
