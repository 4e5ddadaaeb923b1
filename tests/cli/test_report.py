#!/usr/bin/env python3
"""End-to-end tests of `genemask report`: a results.jsonl generated with numpy (known
per-model effects, 10 seeds, 2 groups, 3 tasks, missing seeds, a failed job, a retried job,
a torn last line) is reported, and every number is checked against an independent
computation from the generator's own values: numpy mean/std (ddof=1), scipy.stats.ttest_rel,
markers, bold/second-best positions, improvement percentages; CSVs are parsed back, SVGs
parsed as XML; bad inputs must fail with the file:line or the names present."""
import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

import numpy as np
import scipy.stats

from test_cli import run, summary

GROUPS = {"DNABert": ["ORI 120K", "Gene-PMI-VOC", "ORI 10K", "GeneMask best"],
          "LOGO": ["LOGO ORI 10K", "LOGO GeneMask 10K"]}
BASELINES = {"DNABert": "ORI 10K", "LOGO": "LOGO ORI 10K"}
EFFECT = {"ORI 120K": 0.01, "Gene-PMI-VOC": 0.0, "ORI 10K": 0.0, "GeneMask best": 0.03,
          "LOGO ORI 10K": -0.05, "LOGO GeneMask 10K": -0.02}
TASKS = ["prom-core", "prom-300", "splice-40"]
SHOTS = [10, 50, 1000]
SEEDS = list(range(10))
METRICS = ["accuracy", "auc"]


def record(model, group, task, shots, seed, status="ok", acc=None, auc=None):
    classes = 3 if task == "splice-40" else 2
    r = {"job": f"{model}|{task}|{shots}|{seed}", "model": model, "group": group, "task": task, "shots": shots,
         "seed": seed, "status": status, "n_train": classes * shots, "n_test": 500, "classes": classes,
         "seconds": 1.5, "host": "node01", "rank": 1, "attempts": 1, "out": "runs/x"}
    if status == "ok":
        r.update(accuracy=acc, auc=auc, f1=acc - 0.01, mcc=2 * acc - 1)
    else:
        r["error"] = "CUDA out of memory"
    return r


def generate(rng):
    """Returns (lines of results.jsonl, truth) with truth[(model, task, shots)][seed] = (acc, auc)."""
    truth, lines = {}, []
    base = {"prom-core": 0.6, "prom-300": 0.65, "splice-40": 0.4}
    for group, models in GROUPS.items():
        for model in models:
            for task in TASKS:
                for shots in SHOTS:
                    cell = truth.setdefault((model, task, shots), {})
                    for seed in SEEDS:
                        if model == "GeneMask best" and task == "prom-core" and shots == 10 and seed == 9:
                            continue  # a missing seed: pairs use the 9 shared seeds
                        if model == "ORI 10K" and task == "prom-300" and shots == 50 and seed in (0, 1):
                            continue  # the baseline misses seeds
                        if model == "Gene-PMI-VOC" and task == "splice-40" and shots == 1000 and seed == 9:
                            lines.append(json.dumps(record(model, group, task, shots, seed, "failed")))
                            continue  # failed for good
                        mu = base[task] + 0.05 * math.log10(shots) + EFFECT[model]
                        acc = round(float(np.clip(mu + rng.normal(0, 0.02), 0, 1)) * 500) / 500  # n_test 500
                        auc = float(np.clip(acc + 0.06 + rng.normal(0, 0.02), 0, 1))
                        if model == "ORI 120K" and task == "prom-core" and shots == 50 and seed == 3:
                            lines.append(json.dumps(record(model, group, task, shots, seed, "failed")))
                            lines.append(json.dumps(record(model, group, task, shots, seed, acc=0.1, auc=0.1)))
                            # ...and a rerun whose result replaces it (the last ok record wins)
                        cell[seed] = (acc, auc)
                        lines.append(json.dumps(record(model, group, task, shots, seed, acc=acc, auc=auc)))
    rng.shuffle(lines)  # as a parallel sweep finishes jobs: the report must not depend on file order
    ok_keys = [json.loads(l)["job"] for l in lines if '"ok"' in l]
    # The rerun of ORI 120K|prom-core|50|3 must come after its stale record.
    stale = json.dumps(record("ORI 120K", "DNABert", "prom-core", 50, 3, acc=0.1, auc=0.1))
    lines.remove(stale)
    good = [l for l in lines if json.loads(l)["job"] == "ORI 120K|prom-core|50|3" and json.loads(l)["status"] == "ok"]
    lines.insert(lines.index(good[0]), stale)
    assert len(ok_keys) == len(set(ok_keys)) + 1
    return lines, truth


def shown(v, d=3):
    return float(f"{v:.{d}f}")


def marker(t, p):
    if not t > 0:
        return ""
    return "**" if p < 0.01 else "*" if p < 0.05 else "\u2020" if p < 0.1 else ""


def expected(truth, order):
    """Independent computation of every cell: stats, t-test vs baseline, ranks."""
    group_of = {m: g for g, ms in GROUPS.items() for m in ms}
    cells = {}
    # The seeds a cell should have (no sweep plan.json here): every seed any model has at its
    # task and shots; a cell over fewer is marked n=k/m and not ranked.
    seen = {}
    for (model, task, shots), seeds in truth.items():
        seen.setdefault((task, shots), set()).update(seeds)
    for (model, task, shots), seeds in truth.items():
        row = {"n": len(seeds), "n_expected": len(seen[(task, shots)])}
        base = BASELINES[group_of[model]]
        shared = sorted(set(seeds) & set(truth[(base, task, shots)])) if model != base else []
        row["pairs"] = len(shared)
        for q, m in enumerate(METRICS):
            v = np.array([seeds[s][q] for s in sorted(seeds)])
            row[m + "_mean"], row[m + "_std"] = v.mean(), v.std(ddof=1)
            if model != base and len(shared) < 2:  # no test: t and p empty
                row[m + "_marker"] = ""
            elif model != base:
                a = [seeds[s][q] for s in shared]
                b = [truth[(base, task, shots)][s][q] for s in shared]
                res = scipy.stats.ttest_rel(a, b)
                row[m + "_t"], row[m + "_p"] = res.statistic, res.pvalue
                row[m + "_marker"] = marker(res.statistic, res.pvalue)
            else:
                row[m + "_marker"] = ""
            row[m + "_rank"] = 0
        cells[(model, task, shots)] = row
    for group, models in GROUPS.items():
        for task in TASKS:
            for shots in SHOTS:
                for m in METRICS:
                    vals = {mo: shown(cells[(mo, task, shots)][m + "_mean"]) for mo in models
                            if cells[(mo, task, shots)]["n"] == cells[(mo, task, shots)]["n_expected"]}
                    distinct = sorted(set(vals.values()), reverse=True)
                    for mo, v in vals.items():
                        if v == distinct[0]:
                            cells[(mo, task, shots)][m + "_rank"] = 1
                        elif len(models) >= 3 and v == distinct[1]:
                            cells[(mo, task, shots)][m + "_rank"] = 2
    return cells


class Report(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-report-")
        lines, cls.truth = generate(np.random.default_rng(7))
        cls.sweep = os.path.join(cls.tmp, "sweep")
        os.makedirs(cls.sweep)
        cls.results = os.path.join(cls.sweep, "results.jsonl")
        with open(cls.results, "w") as f:
            f.write("\n".join(lines) + "\n")
            f.write(lines[0][: len(lines[0]) // 2])  # torn last line, no newline
        # The plan orders models and tasks differently from their names.
        cls.order = [m for g in GROUPS.values() for m in g]
        plan = {"models": [{"name": m, "group": g, "model": "runs/" + m} for g, ms in GROUPS.items() for m in ms],
                "tasks": [{"name": t, "dir": "fewshot/" + t} if t == "splice-40" else {"name": t, "train": t + ".tsv"}
                          for t in TASKS], "shots": SHOTS, "seeds": SEEDS}
        with open(os.path.join(cls.sweep, "plan.json"), "w") as f:
            json.dump(plan, f)
        cls.out = os.path.join(cls.tmp, "report")
        cls.proc = run(["report", "--results", cls.results, "--out", cls.out, "--baseline", "ORI 10K",
                        "--baseline", "LOGO ORI 10K"])
        cls.summary = summary(cls.proc)
        cls.cells = expected(cls.truth, cls.order)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def read(self, name):
        with open(os.path.join(self.out, name), encoding="utf-8") as f:
            return f.read()

    def test_summary_counts_and_order(self):
        s = self.summary
        self.assertEqual(s["command"], "report")
        n_ok = sum(len(v) for v in self.truth.values())
        self.assertEqual(s["ok"], n_ok)
        self.assertEqual(s["failed"], 2)
        self.assertEqual(s["records"], n_ok + 1 + 2)  # + stale ok record, + 2 failed
        self.assertEqual(s["failed_jobs"], ["Gene-PMI-VOC|splice-40|1000|9"])
        self.assertEqual(s["models"], self.order)
        self.assertEqual(s["tasks"], TASKS)
        self.assertEqual(s["shots"], SHOTS)
        self.assertEqual(s["baselines"], ["ORI 10K", "LOGO ORI 10K"])
        self.assertIn("ignoring the last line", self.proc.stderr)
        self.assertRegex(self.proc.stderr, r"results\.jsonl:\d+: ignoring the last line")
        self.assertIn("Gene-PMI-VOC|splice-40|1000|9", self.proc.stderr)
        self.assertIn("Failed jobs without a result (1): `Gene-PMI-VOC|splice-40|1000|9`", self.read("table1.md"))

    def test_table1_csv_matches_numpy_and_scipy(self):
        rows = list(csv.DictReader(io.StringIO(self.read("table1.csv"))))
        self.assertEqual(len(rows), len(self.cells))
        # Row order: models in plan order, then shots, then tasks.
        self.assertEqual([(r["model"], int(r["shots"]), r["task"]) for r in rows],
                         [(m, s, t) for m in self.order for s in SHOTS for t in TASKS])
        markers = 0
        for r in rows:
            want = self.cells[(r["model"], r["task"], int(r["shots"]))]
            self.assertEqual(int(r["n"]), want["n"])
            self.assertEqual(int(r["n_expected"]), want["n_expected"])
            self.assertEqual(int(r["pairs"]), want["pairs"])
            for m in METRICS:
                for f in ("mean", "std", "t", "p"):
                    if m + "_" + f not in want:
                        self.assertEqual(r[m + "_" + f], "", (r, f))
                        continue
                    self.assertTrue(math.isclose(float(r[m + "_" + f]), want[m + "_" + f], rel_tol=1e-11, abs_tol=1e-14),
                                    (r["model"], r["task"], r["shots"], m, f, r[m + "_" + f], want[m + "_" + f]))
                self.assertEqual(r[m + "_marker"], want[m + "_marker"], r)
                self.assertEqual(int(r[m + "_rank"]), want[m + "_rank"], r)
                markers += bool(r[m + "_marker"])
        self.assertGreater(markers, 10)  # the effects are large enough to be detected
        ranks = [int(r[m + "_rank"]) for r in rows for m in METRICS]
        self.assertIn(2, ranks)
        # The baseline itself is never tested; the retried job's stale values are not used.
        self.assertTrue(all(r["accuracy_t"] == "" for r in rows if r["model"] in BASELINES.values()))

    def test_table1_markdown_layout_and_highlights(self):
        md = self.read("table1.md")
        rows = [l for l in md.splitlines() if l.startswith("|")]
        header = [c.strip() for c in rows[0].strip("|").split("|")]
        self.assertEqual(header[:2], ["Shots", "Model"])
        self.assertEqual(header[2:], [f"{t} {'Accuracy' if m == 'accuracy' else 'AUC'}" for t in TASKS for m in METRICS])
        body = rows[2:]
        expect_rows = []
        for g, models in GROUPS.items():
            expect_rows.append(("group", g))
            for s in SHOTS:
                for m in models:
                    expect_rows.append((s, m))
        self.assertEqual(len(body), len(expect_rows))
        shots = None
        for line, what in zip(body, expect_rows):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if what[0] == "group":
                self.assertEqual(cells[1], f"**{what[1]}**")
                continue
            shots = int(cells[0]) if cells[0] else shots
            self.assertEqual((shots, cells[1]), what)
            for i, (t, m) in enumerate((t, m) for t in TASKS for m in METRICS):
                want = self.cells[(what[1], t, shots)]
                text = f"{want[m + '_mean']:.3f} \u00b1 {want[m + '_std']:.3f}"
                if want["n"] < want["n_expected"]:
                    text += f" (n={want['n']}/{want['n_expected']})"
                text = {1: f"**{text}**", 2: f"_{text}_", 0: text}[want[m + "_rank"]]
                text += want[m + "_marker"].replace("*", "\\*")
                self.assertEqual(cells[2 + i], text, (what, t, m))
        # splice-40 is of the released few-shot layout in the plan: its std is not over samples.
        self.assertIn("\nIn splice-40, every seed fine-tunes on the same N-shot file (the released few-shot layout), so "
                      "the std is that of fine-tuning alone (initialisation, dropout, batch order); the other tasks draw "
                      "N of each class per seed.\n", md)

    def test_table1_latex(self):
        tex = self.read("table1.tex")
        self.assertIn("\\usepackage[table]{xcolor}", tex)
        self.assertIn("\\multicolumn{7}{c}{\\textbf{LOGO}}", tex)
        body = [l for l in tex.splitlines() if l.endswith("\\\\") and "&" in l and "multicolumn" not in l
                and "textbf{Accuracy}" not in l]
        self.assertEqual(len(body), len(SHOTS) * len(self.order))
        i = 0
        for g, models in GROUPS.items():
            for s in SHOTS:
                for mo in models:
                    cells = [c.strip() for c in body[i][: -2].split(" & ")]
                    i += 1
                    self.assertEqual(cells[1], mo)
                    for j, (t, m) in enumerate((t, m) for t in TASKS for m in METRICS):
                        want = self.cells[(mo, t, s)]
                        text = f"{want[m + '_mean']:.3f} $\\pm$ {want[m + '_std']:.3f}"
                        if want["n"] < want["n_expected"]:
                            text += f" ($n={want['n']}/{want['n_expected']}$)"
                        text = {1: f"\\textbf{{{text}}}", 2: f"\\cellcolor{{yellow}} {text}", 0: text}[want[m + "_rank"]]
                        text += want[m + "_marker"].replace("\u2020", "$\\dagger$")
                        self.assertEqual(cells[2 + j], text)
        caption = tex[tex.index("\\caption{"):]
        self.assertIn(" In splice-40, every seed fine-tunes on the same N-shot file", caption)

    def test_improvement_tables(self):
        rows = list(csv.DictReader(io.StringIO(self.read("improvement.csv"))))
        group_of = {m: g for g, ms in GROUPS.items() for m in ms}
        want_models = [m for m in self.order if m not in BASELINES.values()]
        self.assertEqual([(r["model"], int(r["shots"])) for r in rows], [(m, s) for m in want_models for s in SHOTS])
        md = self.read("improvement.md")
        for r in rows:
            base = BASELINES[group_of[r["model"]]]
            self.assertEqual(r["baseline"], base)
            s = int(r["shots"])
            a = np.mean([np.mean([v[0] for v in self.truth[(r["model"], t, s)].values()]) for t in TASKS])
            b = np.mean([np.mean([v[0] for v in self.truth[(base, t, s)].values()]) for t in TASKS])
            self.assertEqual(int(r["tasks"]), 3)
            self.assertTrue(math.isclose(float(r["improvement_pct"]), 100 * (a - b) / b, rel_tol=1e-10))
            self.assertTrue(math.isclose(float(r["model_mean"]), a, rel_tol=1e-12))
            # Cells over fewer seeds than they should have (Table 1's n=k/m), the model's and the
            # baseline's: counted, and the percentage marked.
            short = sum(0 < self.cells[(mo, t, s)]["n"] < self.cells[(mo, t, s)]["n_expected"]
                        for t in TASKS for mo in (r["model"], base))
            self.assertEqual(int(r["short_cells"]), short)
        self.assertGreater(sum(int(r["short_cells"]) for r in rows), 0)  # the data has short cells
        self.assertIn("improvement(s) are over cells with fewer seeds", self.proc.stderr)
        for m in want_models:
            line = next(l for l in md.splitlines() if l.startswith(f"| {m} |"))
            cells = [x.strip() for x in line.strip("|").split("|")[3:]]
            want = [r for r in rows if r["model"] == m]
            self.assertEqual([float(c.split("%")[0]) for c in cells], [round(float(r["improvement_pct"]), 2) for r in want])
            self.assertEqual([c.endswith(f"(short: {r['short_cells']})") for c, r in zip(cells, want)],
                             [int(r["short_cells"]) > 0 for r in want])
        self.assertIn("\\%$", self.read("improvement.tex"))

    def test_plots(self):
        for t in TASKS:
            svg = os.path.join(self.out, "plots", t + ".svg")
            root = ET.parse(svg).getroot()
            ns = "{http://www.w3.org/2000/svg}"
            series = [g for g in root.iter(ns + "g") if g.get("class") == "series"]
            self.assertEqual([g.get("data-label") for g in series], self.order)
            for g in series:
                self.assertEqual(len(list(g.iter(ns + "circle"))), len(SHOTS))
                self.assertEqual(len([p for p in g.iter(ns + "path") if p.get("class") == "errorbar"]), len(SHOTS))
            self.assertIn("plots/" + t + ".svg", self.summary["files"])
        have_rsvg = shutil.which("rsvg-convert") is not None
        self.assertEqual(self.summary["png"], have_rsvg)
        for t in TASKS:
            png = os.path.join(self.out, "plots", t + ".png")
            self.assertEqual(os.path.exists(png), have_rsvg)
            if have_rsvg:
                with open(png, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_outputs_listed_and_no_temporaries(self):
        files = set(self.summary["files"])
        for name in ["table1.md", "table1.tex", "table1.csv", "improvement.md", "improvement.tex", "improvement.csv"]:
            self.assertIn(name, files)
            self.assertTrue(os.path.getsize(os.path.join(self.out, name)) > 0)
        leftovers = [f for _, _, fs in os.walk(self.out) for f in fs if ".tmp." in f]
        self.assertEqual(leftovers, [])


class ReportOptions(unittest.TestCase):
    """Ordering without a plan, selections, metrics, one seed, no baseline."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="genemask-report-opt-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, recs, name="results.jsonl"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        return path

    def test_no_plan_sorts_names_and_no_baseline_means_no_markers(self):
        recs = [record(m, "", t, 10, s, acc=0.5 + 0.01 * s + (0.1 if m == "b" else 0), auc=0.6)
                for m in ["zeta", "b", "alpha"] for t in ["t2", "t1"] for s in range(3)]
        res = self.write(recs)
        out = os.path.join(self.tmp, "out")
        s = summary(run(["report", "--results", res, "--out", out, "--no-png"]))
        self.assertEqual(s["models"], ["alpha", "b", "zeta"])
        self.assertEqual(s["tasks"], ["t1", "t2"])
        self.assertFalse(s["png"])
        self.assertNotIn("improvement.csv", s["files"])
        with open(os.path.join(out, "table1.md")) as f:
            md = f.read()
        self.assertIn("no significance markers", md)
        self.assertNotIn("N-shot file", md)  # no plan: nothing known of fixed shot files
        self.assertNotIn("(no group)", md)  # no group rows without groups
        self.assertIn("**0.610 \u00b1 0.010**", md)  # b is best; equal AUCs all bold
        self.assertEqual(md.count("**0.600 \u00b1 0.000**"), 6)

    def test_models_tasks_metric_selection_and_single_seed(self):
        recs = [record(m, "G", "t", 10, s, acc=0.5 + 0.01 * s, auc=0.7) for m in ["x", "y"] for s in range(4)]
        recs.append(record("y", "G", "t", 50, 0, acc=0.8, auc=0.9))  # one seed only
        res = self.write(recs)
        out = os.path.join(self.tmp, "out")
        s = summary(run(["report", "--results", res, "--out", out, "--models", "y", "x", "--metric", "mcc,f1",
                         "--baseline", "x", "--decimals", "2", "--no-png"]))
        self.assertEqual(s["models"], ["y", "x"])
        with open(os.path.join(out, "table1.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertIn("mcc_mean", rows[0])
        self.assertNotIn("accuracy_mean", rows[0])
        one = next(r for r in rows if r["model"] == "y" and r["shots"] == "50")
        self.assertEqual((one["n"], one["mcc_std"], one["pairs"], one["mcc_marker"]), ("1", "nan", "0", ""))
        with open(os.path.join(out, "table1.md")) as f:
            md = f.read()
        self.assertIn("0.60 (n=1)", md)  # mcc = 2 * 0.8 - 1
        # y equals x on every seed: all differences 0, so no marker and p = 1.
        same = next(r for r in rows if r["model"] == "y" and r["shots"] == "10")
        self.assertEqual((float(same["mcc_p"]), same["mcc_marker"]), (1.0, ""))
        with open(os.path.join(out, "improvement.csv")) as f:
            imp = list(csv.DictReader(f))
        self.assertEqual([(r["shots"], r["tasks"]) for r in imp], [("10", "1"), ("50", "0")])
        self.assertEqual(float(imp[0]["improvement_pct"]), 0.0)


class ReportPrecision(unittest.TestCase):
    """The fine-tuning precision of the records: named under Table 1, and a warning when a
    model's records mix precisions or the models of a group differ."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="genemask-report-prec-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def report(self, precisions):
        """precisions[model] = the precision of each seed's record (None: no field)."""
        recs = []
        for model, ps in precisions.items():
            for seed, p in enumerate(ps):
                r = record(model, "G" if model != "c" else "", "t", 10, seed, acc=0.6 + 0.01 * seed, auc=0.7)
                if p is not None:
                    r["precision"] = p
                recs.append(r)
        name = "r%d" % len(os.listdir(self.tmp))
        path = os.path.join(self.tmp, name + ".jsonl")
        for r in recs:
            r["jobs_total"] = len(recs)  # as a sweep writes them: counted without a plan
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        out = os.path.join(self.tmp, name)
        p = run(["report", "--results", path, "--out", out])
        with open(os.path.join(out, "table1.md"), encoding="utf-8") as f:
            md = f.read()
        with open(os.path.join(out, "table1.tex"), encoding="utf-8") as f:
            tex = f.read()
        return p, summary(p), md, tex

    def test_one_precision_is_named_without_warning(self):
        p, s, md, tex = self.report({"a": ["bf16", "bf16"], "b": ["bf16", "bf16"]})
        self.assertIn("\nFine-tuning precision: bf16.\n", md)
        self.assertIn("% fine-tuning precision: bf16\n", tex)
        self.assertEqual(s["warnings"], 0)
        self.assertNotIn("precision", p.stderr)

    def test_records_without_precision_say_nothing(self):
        p, s, md, tex = self.report({"a": [None, None], "b": [None, None]})
        self.assertNotIn("precision", md)
        self.assertNotIn("precision", tex)
        self.assertEqual(s["warnings"], 0)

    def test_a_model_mixing_precisions_is_a_warning(self):
        p, s, md, tex = self.report({"a": ["bf16", "bf16", "bf16"], "b": ["fp32", "bf16", None]})
        self.assertIn("model 'b' was fine-tuned in more than one precision: unrecorded (1 record), bf16 (1 record), "
                      "fp32 (1 record); set finetune.precision in the plan", p.stderr.replace("\n", " "))
        self.assertNotIn("model 'a' was", p.stderr)
        self.assertIn("Fine-tuning precision: bf16 for 'a'; mixed (unrecorded, bf16, fp32) for 'b'.", md)
        self.assertEqual(s["warnings"], 1)

    def test_models_of_a_group_in_different_precisions_is_a_warning(self):
        # a and b share group G; c is alone in group "" and may differ from them
        p, s, md, tex = self.report({"a": ["bf16", "bf16"], "b": ["fp32", "fp32"], "c": ["fp32", "fp32"]})
        self.assertIn("the models of group 'G' were fine-tuned in different precisions (bf16 for 'a'; fp32 for 'b')",
                      p.stderr)
        self.assertEqual(s["warnings"], 1)
        self.assertIn("Fine-tuning precision: bf16 for 'a'; fp32 for 'b', 'c'.", md)


class ReportTestInTrain(unittest.TestCase):
    """Records that scored test sequences also in their training set (test_in_train) are
    named per model and task, records of a test table that repeats sequences
    (test_duplicates) per task; records without the fields (from before) and zeros are not."""

    def report_of(self, count):
        """The report of 2 models x 2 tasks x 3 seeds, each record's field from count(model,
        task, seed) (None: left out)."""
        tmp = tempfile.mkdtemp(prefix="genemask-report-flagged-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        recs = []
        for model in ("a", "b"):
            for task in ("t1", "t2"):
                for seed in range(3):
                    r = record(model, "", task, 10, seed, acc=0.6 + 0.01 * seed, auc=0.7)
                    r.update(count(model, task, seed))
                    recs.append(r)
        path = os.path.join(tmp, "r.jsonl")
        for r in recs:
            r["jobs_total"] = len(recs)  # as a sweep writes them: counted without a plan
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        return run(["report", "--results", path, "--out", os.path.join(tmp, "out"), "--no-png"])

    def test_named_per_model_and_task(self):
        p = self.report_of(lambda model, task, seed: {"test_in_train": [0, 4, 7][seed]} if (model, task) == ("a", "t2")
                           else {"test_in_train": 0} if model == "b" else {})
        self.assertEqual(summary(p)["warnings"], 1, p.stderr)
        self.assertIn("model 'a' on task 't2': 2 record(s) scored test sequences that are also training sequences "
                      "(up to 7 per job", p.stderr)

    def test_test_tables_that_repeat_sequences_are_named_per_task(self):
        p = self.report_of(lambda model, task, seed: {
            "test_duplicates": 5 if task == "t1" and model == "b" and seed > 0 else 0})
        self.assertEqual(summary(p)["warnings"], 1, p.stderr)
        self.assertIn("task 't1': 2 record(s) scored a test table that repeats sequences (up to 5 repeats", p.stderr)
        self.assertNotIn("task 't2'", p.stderr)


class ReportWithoutPlan(unittest.TestCase):
    """A results file reported without its sweep's plan.json (a copy taken off the cluster):
    its records say how many jobs the sweep had, so a copy cut at a line end (every record
    whole) is refused instead of read as a smaller sweep, its cells' means over fewer seeds
    unmarked and ranked. Records of before (no jobs_total) are reported with a warning."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="genemask-report-noplan-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        # In the sweep's order: shots descending, then model, task, seed.
        self.recs = [record(m, "", "t", shots, seed, acc=0.6 + 0.01 * seed + (0.05 if m == "a" else 0), auc=0.7)
                     for shots in (100, 10) for m in ("a", "b") for seed in range(3)]

    def report(self, recs, name, plan=None):
        path = os.path.join(self.tmp, name + ".jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        args = ["report", "--results", path, "--out", os.path.join(self.tmp, name), "--no-png"]
        return run(args + (["--plan", plan] if plan else []), check=False)

    def test_a_copy_cut_at_a_line_end_is_refused(self):
        recs = [dict(r, jobs_total=len(self.recs)) for r in self.recs]
        p = self.report(recs, "whole")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(summary(p)["warnings"], 0, p.stderr)
        for keep in (len(recs) - 1, 8, 6):  # inside a cell; a cell gone; the whole 10-shot block gone
            p = self.report(recs[:keep], f"cut{keep}")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"cut{keep}.jsonl: holds records of {keep} of the 12 jobs of the sweep that wrote them (their "
                          '"jobs_total"), and no sweep plan.json is beside it or given with --plan: the file was cut '
                          "short, or the sweep has not finished", p.stderr.replace("\n", " "))
            self.assertFalse(os.path.exists(os.path.join(self.tmp, f"cut{keep}", "table1.md")))
        # A plan of the user's (order and groups only) does not count the seeds either.
        plan = os.path.join(self.tmp, "order.json")
        with open(plan, "w") as f:
            json.dump({"models": [{"name": "b", "path": "random"}, {"name": "a", "path": "random"}], "tasks": ["t"]}, f)
        p = self.report(recs[:8], "cut-order", plan=plan)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("and the plan given is not a sweep's own plan.json", p.stderr.replace("\n", " "))
        # A failed job is a job: its record counts.
        failed = recs[:-1] + [dict(record("b", "", "t", 10, 2, status="failed"), jobs_total=12)]
        self.assertEqual(self.report(failed, "failed").returncode, 0)
        # Each sweep's jobs are counted on their own: a cut sweep followed by another sweep's
        # whole records (more jobs in all than the first sweep had) was taken as whole.
        a = [dict(r, sweep_id="a" * 32) for r in recs]
        b = [dict(record("c", "", "t", 10, seed, acc=0.7, auc=0.8), jobs_total=6, sweep_id="b" * 32) for seed in range(6)]
        self.assertEqual(self.report(a + b, "two").returncode, 0)
        p = self.report(a[:8] + b, "cut-two")  # 14 jobs in all, 8 of the first sweep's 12
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("holds records of 8 of the 12 jobs of the sweep aaaaaaaaaaaa that wrote them", p.stderr)

    def test_records_without_their_counts_are_named(self):
        """n_train, n_test and classes hold the one-test-table and N-shot checks: a record
        without them (not as a sweep writes it) passed both by default, without a word."""
        recs = [dict(r, jobs_total=12) for r in self.recs]
        for k in ("n_train", "n_test", "classes"):
            del recs[3][k]
        p = self.report(recs, "uncounted")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("1 of the 12 records shown give no n_train, n_test or classes, which the others give (first: "
                      "job b|t|100|0 on line 4",
                      p.stderr.replace("\n", " "))

    def test_records_of_before_are_reported_with_a_warning(self):
        p = self.report(self.recs[:8], "before")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(summary(p)["warnings"], 1, p.stderr)
        self.assertIn("its records do not say how many jobs their sweep had (written by an earlier genemask): the "
                      "cells' seeds are not counted against a plan, so a results file cut short reads as a smaller "
                      "sweep", p.stderr.replace("\n", " "))


class ReportReplicates(unittest.TestCase):
    """Issue 33: arms of pretraining replicates. Made-up records (3 replicates of GeneMask,
    3 of random with the same ids: paired; 2 of PMI with other ids: Welch; one arm of one
    replicate; missing fine-tuning seeds and a replicate missing a whole cell), reported with
    --baseline ARM, and every number recomputed with numpy and SciPy."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-replicates-")
        rng = np.random.default_rng(33)
        cls.arms = {"GeneMask": [1, 2, 3], "random": [1, 2, 3], "PMI": [4, 5], "single": [1]}
        cls.truth = {}  # (arm, replicate, task, shots) -> {seed: (acc, auc)}
        recs = []
        for arm, reps in cls.arms.items():
            for rep in reps:
                pretrain_luck = rng.normal(0, 0.02)  # what one pretraining run does to every seed
                for task in ("t1", "t2"):
                    for shots in (10, 50):
                        if arm == "PMI" and rep == 5 and task == "t2" and shots == 50:
                            continue  # a replicate missing a whole cell: 1 PMI replicate there
                        for seed in range(6):
                            if arm == "GeneMask" and rep == 2 and seed in (0, 4):
                                continue  # missing fine-tuning jobs
                            acc = float(np.clip(0.6 + 0.03 * (arm == "GeneMask") + pretrain_luck
                                                + rng.normal(0, 0.01), 0, 1))
                            auc = float(np.clip(acc + 0.05 + rng.normal(0, 0.01), 0, 1))
                            cls.truth.setdefault((arm, rep, task, shots), {})[seed] = (acc, auc)
                            r = record(f"{arm} s{rep}", "", task, shots, seed, acc=acc, auc=auc)
                            r.update(arm=arm, replicate=rep)
                            recs.append(r)
        cls.results = os.path.join(cls.tmp, "results.jsonl")
        with open(cls.results, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        cls.out = os.path.join(cls.tmp, "rep")
        cls.proc = run(["report", "--results", cls.results, "--out", cls.out, "--baseline", "random", "--no-png"])
        with open(os.path.join(cls.out, "replicates.csv"), newline="") as f:
            cls.rows = list(csv.DictReader(f))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def replicate_means(self, arm, task, shots, metric):
        q = METRICS.index(metric)
        return {rep: np.mean([v[q] for v in self.truth[(arm, rep, task, shots)].values()])
                for rep in self.arms[arm] if (arm, rep, task, shots) in self.truth}

    def test_arm_statistics_and_tests_match_numpy_and_scipy(self):
        self.assertEqual(summary(self.proc)["arms"], ["GeneMask", "PMI", "random", "single"])
        seen = 0
        for row in self.rows:
            arm, task, shots, metric = row["arm"], row["task"], int(row["shots"]), row["metric"]
            means = self.replicate_means(arm, task, shots, metric)
            ids = sorted(means)
            self.assertEqual(row["replicate_ids"].split(), [str(i) for i in ids])
            got_means = [float(x) for x in row["replicate_means"].split()]
            self.assertTrue(np.allclose(got_means, [means[i] for i in ids], rtol=0, atol=1e-14))
            self.assertEqual([int(x) for x in row["seeds"].split()],
                             [len(self.truth[(arm, i, task, shots)]) for i in ids])
            self.assertAlmostEqual(float(row["mean"]), np.mean([means[i] for i in ids]), places=13)
            if len(ids) >= 2:
                self.assertAlmostEqual(float(row["spread"]), np.std([means[i] for i in ids], ddof=1), places=13)
            else:
                self.assertEqual(row["spread"], "")
            base = self.replicate_means("random", task, shots, metric)
            if arm == "random":
                self.assertEqual((row["baseline"], row["test"]), ("", ""))
                continue
            self.assertEqual(row["baseline"], "random")
            a = [means[i] for i in ids]
            b = [base[i] for i in sorted(base)]
            if ids == sorted(base) and len(ids) >= 2:
                want, kind = scipy.stats.ttest_rel(a, b), "paired"
            elif len(a) >= 2 and len(b) >= 2:
                want, kind = scipy.stats.ttest_ind(a, b, equal_var=False), "welch"
            else:
                self.assertEqual(row["test"], "")  # one replicate: nothing to test with
                continue
            self.assertEqual(row["test"], kind, row)
            self.assertTrue(math.isclose(float(row["t"]), want.statistic, rel_tol=1e-9, abs_tol=1e-12))
            self.assertTrue(math.isclose(float(row["p"]), want.pvalue, rel_tol=1e-9, abs_tol=1e-300))
            self.assertTrue(math.isclose(float(row["df"]), want.df, rel_tol=1e-9), (row["df"], want.df))
            seen += 1
        # GeneMask (paired) and PMI (Welch, and one cell with one replicate) on 2 tasks x 2 shots x 2 metrics
        self.assertEqual(seen, 8 + 6)

    def test_welch_without_spread_has_no_degrees_of_freedom(self):
        """Two arms whose replicates agree exactly (other ids: Welch's test): t is inf, p 0,
        and df is left empty, where 0 was written (Welch-Satterthwaite's df is 0/0 there)."""
        recs = []
        for arm, reps, acc in (("a", (1, 2), 0.7), ("base", (3, 4), 0.6)):
            for rep in reps:
                for seed in range(2):
                    r = record(f"{arm} s{rep}", "", "t1", 10, seed, acc=acc, auc=acc)
                    r.update(arm=arm, replicate=rep)
                    recs.append(r)
        path = os.path.join(self.tmp, "flat.jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        out = os.path.join(self.tmp, "flat")
        run(["report", "--results", path, "--out", out, "--baseline", "base", "--no-png"])
        with open(os.path.join(out, "replicates.csv"), newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["arm"] == "a"]
        self.assertEqual(len(rows), 2)  # accuracy, auc
        for r in rows:
            self.assertEqual((r["test"], r["t"], r["p"], r["df"]), ("welch", "inf", "0", ""), r)

    def test_table1_pairs_each_replicate_with_the_baseline_replicate_of_its_id(self):
        with open(os.path.join(self.out, "table1.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        baseline_of = {r["model"]: r["baseline"] for r in rows}
        self.assertEqual(baseline_of["GeneMask s2"], "random s2")
        self.assertEqual(baseline_of["single s1"], "random s1")
        self.assertEqual(baseline_of["PMI s4"], "")  # no replicate 4 of random: not compared over seeds
        with open(os.path.join(self.out, "table1.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("paired t-test over the fine-tuning seeds only", md)
        self.assertIn("replicate of the same id of arm random", md)

    def test_markdown_note_and_the_warning_for_one_replicate(self):
        with open(os.path.join(self.out, "replicates.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("| Shots | Arm |", md)
        self.assertIn("whose unit is the pretraining replicate", md)
        self.assertIn("Welch's test", md)
        self.assertIn("cannot be separated from the luck of one pretraining run", self.proc.stderr)
        self.assertGreaterEqual(summary(self.proc)["warnings"], 1)
        self.assertIn("(k=3)", md)
        with open(os.path.join(self.out, "replicates.tex"), encoding="utf-8") as f:
            self.assertIn("\\label{tab:replicates}", f.read())

    def test_no_arms_no_replicates_table(self):
        recs = [record("a", "", "t", 10, s, acc=0.5 + s / 100, auc=0.6) for s in range(3)]
        path = os.path.join(self.tmp, "plain.jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        out = os.path.join(self.tmp, "plain")
        s = summary(run(["report", "--results", path, "--out", out, "--no-png"]))
        self.assertEqual(s["arms"], [])
        self.assertFalse(os.path.exists(os.path.join(out, "replicates.md")))


class ReportErrors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="genemask-report-err-")
        self.good = [record(m, "", "t", 10, s, acc=0.6, auc=0.7) for m in ["a", "b"] for s in range(2)]

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fails(self, text, extra=(), name="results.jsonl"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        p = run(["report", "--results", path, "--out", os.path.join(self.tmp, "out")] + list(extra), check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(p.stdout.strip(), "")  # no summary on failure
        return p.stderr

    def lines(self, recs):
        return "".join(json.dumps(r) + "\n" for r in recs)

    def test_bad_line_in_the_middle_names_file_and_line(self):
        text = self.lines(self.good[:2]) + "{not json\n" + self.lines(self.good[2:])
        err = self.fails(text)
        self.assertRegex(err, r"results\.jsonl:3: not valid JSON")

    def test_wrong_field_types_name_the_line(self):
        bad = dict(self.good[1], shots="ten")
        err = self.fails(self.lines([self.good[0], bad] + self.good[2:]))
        self.assertIn("results.jsonl:2: \"shots\" is \"ten\", expected an integer", err)
        for shots in (0, -10):  # no few-shot job; Table 1 showed them as rows "0" and "-10"
            bad = dict(self.good[1], shots=shots, job=f"a|t|{shots}|1")
            self.assertIn(f"results.jsonl:2: \"shots\" is {shots}: a few-shot job trains on N >= 1 sequences",
                          self.fails(self.lines([self.good[0], bad] + self.good[2:])))
        bad = dict(self.good[1], status="done")
        self.assertIn("results.jsonl:2: \"status\" is \"done\"", self.fails(self.lines([self.good[0], bad])))
        bad = dict(self.good[1])
        del bad["model"]
        self.assertIn("results.jsonl:2: the record has no \"model\"", self.fails(self.lines([self.good[0], bad])))

    def test_unknown_baseline_lists_the_models(self):
        err = self.fails(self.lines(self.good), ["--baseline", "ORI 10K"])
        self.assertIn("baseline 'ORI 10K' has no ok results; models present: 'a', 'b'", err)

    def test_unknown_model_and_metric(self):
        self.assertIn("model 'c' has no ok results; present: 'a', 'b'",
                      self.fails(self.lines(self.good), ["--models", "c"]))
        self.assertIn("unknown metric 'acc'", self.fails(self.lines(self.good), ["--metric", "acc"]))

    def test_missing_metric_names_the_line(self):
        recs = list(self.good)
        recs[2] = dict(recs[2])
        del recs[2]["f1"]
        self.assertIn("results.jsonl:3: the ok record of b|t|10|0 has no \"f1\"",
                      self.fails(self.lines(recs), ["--metric", "f1"]))

    def test_model_in_two_groups(self):
        recs = [dict(self.good[0], group="X"), dict(self.good[1], group="Y")]
        self.assertIn("results.jsonl:2: model 'a' is in group 'Y' here but in group 'X' on line 1",
                      self.fails(self.lines(recs)))

    def test_empty_and_only_failed_and_missing(self):
        self.assertIn("no ok records (0 records, 0 failed)", self.fails(""))
        failed = [record("a", "", "t", 10, 0, "failed")]
        self.assertIn("no ok records (1 records, 1 failed)", self.fails(self.lines(failed)))
        p = run(["report", "--results", os.path.join(self.tmp, "nope.jsonl"), "--out", self.tmp], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("nope.jsonl", p.stderr)

    def test_seeds_take_the_whole_unsigned_range(self):
        """A sweep and finetune take seeds 0 to 2^64-1: the report reads them all back."""
        recs = [record(m, "", "t", 10, s, acc=0.6 + 0.01 * i, auc=0.7) for m in ["a", "b"]
                for i, s in enumerate([0, 2**63, 2**64 - 1])]
        path = os.path.join(self.tmp, "big.jsonl")
        with open(path, "w") as f:
            f.write(self.lines(recs))
        out = os.path.join(self.tmp, "big")
        run(["report", "--results", path, "--out", out, "--no-png"])
        with open(os.path.join(out, "table1.md")) as f:
            self.assertIn(f"{np.mean([0.6, 0.61, 0.62]):.3f}", f.read())
        for seed, shown in [(2**64, "1.8446744073709552e+19"), (-1, "-1"), (1.5, "1.5")]:
            bad = dict(self.good[1], seed=seed, job=f"a|t|10|{seed}")
            self.assertIn(f'results.jsonl:2: "seed" is {shown}, expected an integer in [0, 2^64-1]',
                          self.fails(self.lines([self.good[0], bad])))

    def test_a_metric_model_or_task_named_twice(self):
        """One rule for the three lists: a repeat is refused (it doubled columns, or hid a slip
        for another name)."""
        self.assertIn("--metric names 'accuracy' twice", self.fails(self.lines(self.good), ["--metric", "accuracy,auc,accuracy"]))
        self.assertIn("--models names 'a' twice; name each model once",
                      self.fails(self.lines(self.good), ["--models", "a", "b", "a"]))
        self.assertIn("--tasks names 't' twice; name each task once", self.fails(self.lines(self.good), ["--tasks", "t", "t"]))

    def test_two_baselines_in_one_group(self):
        self.assertIn("both in group ''", self.fails(self.lines(self.good), ["--baseline", "a", "--baseline", "b"]))

    def test_help_explains_layout_and_markers(self):
        p = run(["report", "--help"])
        for s in ["--baseline", "--metric", "table1.md", "improvement", "p<0.01", "†", "ddof=1", "rsvg-convert", "finetune.precision"]:
            self.assertIn(s, p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
