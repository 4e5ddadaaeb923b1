#!/usr/bin/env python3
"""Our metrics and paired t-test against scikit-learn and SciPy on many random cases:
binary AUC with heavy ties, imbalanced and tiny test sets, 3-4 class one-vs-one macro AUC,
macro F1 with absent classes, MCC including its undefined case, and ttest_rel from
p ~ 1e-9 to p ~ 1. The C++ side is reached through the test-only tool metrics_tool."""
import json
import math
import os
import subprocess
import tempfile
import unittest

import numpy as np
import scipy.stats
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef, roc_auc_score

TOOL = os.environ.get("METRICS_TOOL", "build/tests/metrics_tool")
REL = 1e-12


def run_tool(cases):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f)
    try:
        p = subprocess.run([TOOL, f.name], capture_output=True, text=True, check=True)
    finally:
        os.unlink(f.name)
    out = json.loads(p.stdout)
    assert len(out) == len(cases)
    return out


def close(a, b, rel=REL, abs_tol=1e-15):
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)


def binary_cases(rng):
    cases = []
    for i in range(300):
        kind = i % 5
        n = int(rng.integers(2, 400)) if kind != 3 else int(rng.integers(2, 6))
        if kind == 2:  # imbalanced: about 3% positives
            y = (rng.random(n) < 0.03).astype(int)
        else:
            y = rng.integers(0, 2, n)
        y[0], y[-1] = 0, 1  # both classes present
        p1 = rng.random(n)
        if kind in (1, 3):
            p1 = np.round(p1, 1)  # heavy ties
        if kind == 4:
            p1 = np.clip(0.5 + 0.3 * (y - 0.5) + rng.normal(0, 0.3, n), 0, 1).round(2)
        probs = np.stack([1 - p1, p1], axis=1)
        c = {"kind": "classify", "classes": 2, "labels": y.tolist(), "probs": probs.ravel().tolist()}
        cases.append((c, y, probs, None))
    return cases


def multiclass_cases(rng):
    cases = []
    for i in range(200):
        k = 3 if i % 3 else 4
        n = int(rng.integers(k, 300)) if i % 7 else int(rng.integers(k, k + 4))
        w = np.array([1.0] * (k - 1) + [0.15 if i % 2 else 1.0])  # last class rare every other case
        y = rng.choice(k, n, p=w / w.sum())
        y[:k] = np.arange(k)  # every class present (required by the one-vs-one AUC)
        if i % 4 == 0:  # few distinct rows: ties across samples, still rows summing to 1
            base = rng.integers(1, 4, (5, k)).astype(float)
            probs = (base / base.sum(axis=1, keepdims=True))[rng.integers(0, 5, n)]
        else:
            z = rng.normal(0, 1, (n, k)) + 1.5 * np.eye(k)[y]
            probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        pred = None
        c = {"kind": "classify", "classes": k, "labels": y.tolist(), "probs": probs.ravel().tolist()}
        if i % 5 == 0:  # arbitrary predictions, some classes never predicted
            pred = rng.integers(0, k - 1, n)
            c["predicted"] = pred.tolist()
        cases.append((c, y, probs, pred))
    return cases


class Metrics(unittest.TestCase):
    def check(self, cases):
        out = run_tool([c for c, _, _, _ in cases])
        for (c, y, probs, pred), r in zip(cases, out):
            k = c["classes"]
            self.assertNotIn("error", r, r)
            argmax = np.argmax(probs, axis=1)
            self.assertEqual(r["argmax"], argmax.tolist())
            if pred is None:
                pred = argmax
            if k == 2:
                want_auc = roc_auc_score(y, probs[:, 1])
            else:
                want_auc = roc_auc_score(y, probs, multi_class="ovo", average="macro")
            labels = list(range(k))
            want = {"auc": want_auc, "accuracy": accuracy_score(y, pred),
                    "f1": f1_score(y, pred, labels=labels, average="macro", zero_division=0),
                    "mcc": matthews_corrcoef(y, pred)}
            for m, v in want.items():
                self.assertTrue(close(r[m], v), f"{m}: ours {r[m]!r} sklearn {v!r} (n={len(y)}, classes={k})")

    def test_binary_against_sklearn(self):
        self.check(binary_cases(np.random.default_rng(1)))

    def test_multiclass_against_sklearn(self):
        self.check(multiclass_cases(np.random.default_rng(2)))

    def test_degenerate_cases(self):
        y = np.array([0, 1, 1, 0, 1])
        probs = np.array([[0.2, 0.8]] * 5)  # all tied, one class predicted
        cases = [({"kind": "classify", "classes": 2, "labels": y.tolist(), "probs": probs.ravel().tolist()},
                  y, probs, None)]
        self.check(cases)
        r = run_tool([cases[0][0]])[0]
        self.assertEqual(r["auc"], 0.5)
        self.assertEqual(r["mcc"], 0.0)  # sklearn: 0 when undefined

    def test_single_class_auc_is_undefined_as_in_sklearn(self):
        y = np.array([1, 1, 1])
        probs = np.array([[0.3, 0.7], [0.6, 0.4], [0.5, 0.5]])
        # scikit-learn 1.9 warns and returns NaN (older versions raised ValueError);
        # genemask reports it as an error that names the cause.
        from sklearn.exceptions import UndefinedMetricWarning
        with self.assertWarns(UndefinedMetricWarning):
            self.assertTrue(np.isnan(roc_auc_score(y, probs[:, 1])))
        r = run_tool([{"kind": "classify", "classes": 2, "labels": y.tolist(), "probs": probs.ravel().tolist()},
                      {"kind": "classify", "classes": 3, "labels": [0, 1, 1],
                       "probs": [1 / 3] * 9}])
        self.assertIn("only one class is present", r[0]["error"])
        self.assertIn("only one class is present", r[1]["error"])  # class 2 absent


class TTest(unittest.TestCase):
    def test_ttest_rel_against_scipy(self):
        rng = np.random.default_rng(3)
        cases, pairs = [], []
        for i in range(400):
            n = int(rng.integers(2, 40))
            b = rng.random(n)
            mode = i % 4
            if mode == 0:  # no effect: p anywhere in (0, 1), often near 0.5
                a = b + rng.normal(0, 0.05, n)
            elif mode == 1:  # strong effect: p down to ~1e-9
                a = b + 0.02 + rng.normal(0, 0.01, n)
            else:  # effect tuned so that p ~ 1e-6 (mode 2) or p ~ 0.5 (mode 3)
                e = rng.normal(0, 1, n)
                e = (e - e.mean()) / e.std(ddof=1)
                target = 1e-6 if mode == 2 else 0.5
                t = scipy.stats.t.isf(target / 2, n - 1)
                a = b + (t / math.sqrt(n) + e) * 0.01
            cases.append({"kind": "ttest", "a": a.tolist(), "b": b.tolist()})
            pairs.append((a, b))
        out = run_tool(cases)
        ps = []
        for (a, b), r in zip(pairs, out):
            want = scipy.stats.ttest_rel(a, b)
            self.assertTrue(r["defined"])
            self.assertEqual(r["df"], len(a) - 1)
            self.assertTrue(close(r["t"], want.statistic, abs_tol=1e-12), (r["t"], want.statistic))
            self.assertTrue(close(r["p"], want.pvalue, rel=1e-10), (r["p"], want.pvalue, len(a)))
            self.assertTrue(close(r["mean_a"], np.mean(a)))
            self.assertTrue(close(r["std_a"], np.std(a, ddof=1)))
            ps.append(want.pvalue)
        ps = np.array(ps)
        self.assertGreater(np.sum((ps > 1e-7) & (ps < 1e-5)), 50)  # the small-p regime is covered
        self.assertGreater(np.sum((ps > 0.3) & (ps < 0.7)), 50)
        self.assertLess(ps.min(), 1e-8)

    def test_welch_against_scipy(self):
        """Welch's test (the report's test over pretraining replicates of unequal counts)
        against scipy.stats.ttest_ind(equal_var=False): unequal sizes and variances, p from
        near 1 down to ~1e-8."""
        rng = np.random.default_rng(33)
        cases, pairs = [], []
        for i in range(400):
            na, nb = int(rng.integers(2, 12)), int(rng.integers(2, 12))
            a = rng.normal(0.6, rng.uniform(0.001, 0.05), na)
            b = rng.normal(0.6 + (0, 0.01, 0.05, 0.2)[i % 4], rng.uniform(0.001, 0.05), nb)
            cases.append({"kind": "welch", "a": a.tolist(), "b": b.tolist()})
            pairs.append((a, b))
        out = run_tool(cases)
        ps = []
        for (a, b), r in zip(pairs, out):
            want = scipy.stats.ttest_ind(a, b, equal_var=False)
            self.assertTrue(r["defined"])
            self.assertTrue(close(r["t"], want.statistic, abs_tol=1e-11), (r["t"], want.statistic))
            self.assertTrue(close(r["p"], want.pvalue, rel=1e-9, abs_tol=1e-300), (r["p"], want.pvalue, len(a), len(b)))
            self.assertTrue(close(r["df"], want.df, rel=1e-10), (r["df"], want.df))
            ps.append(want.pvalue)
        ps = np.array(ps)
        self.assertGreater(np.sum(ps > 0.3), 50)
        self.assertLess(ps.min(), 1e-6)
        degenerate = run_tool([{"kind": "welch", "a": [0.5], "b": [0.4, 0.3]},
                               {"kind": "welch", "a": [0.5, 0.5], "b": [0.5, 0.5, 0.5]},
                               {"kind": "welch", "a": [0.6, 0.6], "b": [0.5, 0.5]}])
        self.assertEqual([r["p"] for r in degenerate], [1.0, 1.0, 0.0])
        self.assertEqual(degenerate[2]["t"], "inf")
        # No degrees of freedom where Welch-Satterthwaite's is 0/0 (both variances 0) or a side
        # has one value: none (JSON null), where 0 was given (SciPy puts 1 in place of its nan).
        self.assertEqual([r["df"] for r in degenerate], [None, None, None])

    def test_degenerate_ttest(self):
        out = run_tool([{"kind": "ttest", "a": [0.5], "b": [0.4]},
                        {"kind": "ttest", "a": [0.5, 0.6, 0.7], "b": [0.5, 0.6, 0.7]},
                        {"kind": "ttest", "a": [2.0, 3.0, 4.0], "b": [1.0, 2.0, 3.0]}])
        # SciPy gives nan, nan and (inf, 0): we report p = 1 (no evidence) for the first two.
        self.assertTrue(math.isnan(scipy.stats.ttest_rel([0.5, 0.6, 0.7], [0.5, 0.6, 0.7]).pvalue))
        self.assertEqual([r["p"] for r in out], [1.0, 1.0, 0.0])
        self.assertEqual([r["defined"] for r in out], [False, False, False])
        want = scipy.stats.ttest_rel([2.0, 3.0, 4.0], [1.0, 2.0, 3.0])
        self.assertEqual((out[2]["t"], out[2]["p"]), ("inf", want.pvalue))
        self.assertEqual(want.statistic, math.inf)


if __name__ == "__main__":
    unittest.main(verbosity=2)
