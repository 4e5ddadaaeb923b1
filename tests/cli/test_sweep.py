#!/usr/bin/env python3
"""End-to-end tests of `genemask sweep` (MPI manager/worker): simulated jobs (--simulate)
at 1, 2 and 4 ranks give the same records, every job once, long jobs first; retries and
failures; kill -9 and SIGTERM mid-sweep, then restart; torn last line; plan changes.
SweepFinetune (run only when named: needs libgenemask_model.so) does real fine-tuning."""
import hashlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import re
import sys
import tempfile
import time
import unittest

from test_cli import BIN, ENV, mpiexec, run, summary

MODELS = [{"name": "A", "path": "random"}, {"name": "B 2", "path": "random", "config": "dnabert", "group": "G"}]
TASKS = ["t1", "t2"]
SHOTS = [10, 100, 1000]
SEEDS = [1, 2, 3]
VOLATILE = ("seconds", "host", "rank", "out", "device")  # differ between runs by nature
# "record_sha256" (over the others, the volatile ones too) is checked on its own.
# "jobs_total" (the jobs of the plan the record was written under) and "sweep_id" (the sweep
# directory's id, random) are checked on their own.
M64 = (1 << 64) - 1
TABLE = "sequence,label\nACGTACGTAC,0\nTTGACCATGA,1\n"  # train.csv and test.csv
TABLE_SHA256 = hashlib.sha256(TABLE.encode()).hexdigest()


def fnv1a(s):
    h = 1469598103934665603
    for c in s.encode():
        h = ((h ^ c) * 1099511628211) & M64
    return h


def unit(x):
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    x ^= x >> 31
    return (x >> 11) / 9007199254740992.0


def builtin_sha256(config):
    """The plan's digest of a built-in architecture: its name, so "logo" records are never
    taken for "dnabert" ones."""
    return hashlib.sha256(f"genemask built-in config: {config}".encode()).hexdigest()


def expected_record(model, task, shots, seed):
    """What a simulated job must produce: an independent re-implementation of the hash."""
    key = f"{model['name']}|{task}|{shots}|{seed}"
    h = fnv1a(key)
    acc = 0.5 + 0.45 * unit(h)
    return {"job": key, "model": model["name"], "group": model.get("group", ""), "task": task, "shots": shots,
            "seed": seed, "status": "ok", "accuracy": acc, "auc": 0.5 + 0.45 * unit((h + 1) & M64),
            "f1": 0.4 + 0.5 * unit((h + 2) & M64), "mcc": 2 * acc - 1, "n_train": 2 * shots, "n_test": 200,
            "classes": 2, "attempts": 1, "checkpoint": "random", "checkpoint_step": None,
            # What the job read (issue 31): both tables hold TABLE; a built-in random model has no
            # file, and its identity is its architecture's name (docs/formats.md).
            "train_sha256": TABLE_SHA256, "test_sha256": TABLE_SHA256,
            "model_sha256": builtin_sha256(model.get("config", "logo")), "simulated": True,
            # The fine-tuning settings it ran with: the plan's defaults (docs/sweep.md).
            "finetune": {"lr": 0.0, "epochs": 0, "batch": 0, "dropout": 0.1, "warmup_fraction": 0.1,
                         "weight_decay": 0.01, "precision": "auto"}}


def read_records(out, allow_torn=True):
    """Every line of results.jsonl must parse, except a final line without newline."""
    with open(os.path.join(out, "results.jsonl")) as f:
        text = f.read()
    lines = text.split("\n")
    torn = lines.pop()  # "" when the file ends with a newline
    if torn and not allow_torn:
        raise AssertionError(f"torn last line: {torn!r}")
    return [json.loads(l) for l in lines]


def stable(records):
    return sorted(({k: v for k, v in r.items() if k not in VOLATILE + ("jobs_total", "sweep_id", "record_sha256")}
                   for r in records), key=lambda r: r["job"])


def last_per_job(records):
    d = {}
    for r in records:
        d[r["job"]] = r
    return list(d.values())


def session_pids(sid):
    """Processes of the session started for mpirun (its ranks have their own process groups)."""
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[3]) == sid:
                    pids.append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return pids


class SweepBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-sweep-")
        for name in ["train.csv", "test.csv"]:
            with open(os.path.join(cls.tmp, name), "w") as f:
                f.write(TABLE)
        cls.plan = cls.write_plan("plan.json")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def write_plan(cls, name, **over):
        plan = {"models": MODELS, "tasks": [{"name": t, "train": "train.csv", "test": "test.csv"} for t in TASKS],
                "shots": SHOTS, "seeds": len(SEEDS)}
        plan.update(over)
        path = os.path.join(cls.tmp, name)
        with open(path, "w") as f:
            json.dump(plan, f)
        return path

    def out(self, name):
        return os.path.join(self.tmp, name)

    def sweep(self, out, ranks=None, extra=(), plan=None, check=True, simulate="0"):
        args = ["sweep", "--plan", plan or self.plan, "--out", out, "--progress-every", "0"]
        if simulate is not None:
            args += ["--simulate", simulate]
        return run(args + list(extra), ranks=ranks, check=check)

    def expected(self, models=MODELS, seeds=SEEDS):
        return stable(expected_record(m, t, s, seed) for m, t, s, seed in itertools.product(models, TASKS, SHOTS, seeds))


class SweepSimulated(SweepBase):
    def test_same_records_at_1_2_4_ranks(self):
        want = self.expected()
        self.assertEqual(len(want), 36)
        for ranks, workers in [(None, 1), (1, 1), (2, 1), (4, 3)]:
            out = self.out(f"np{ranks}")
            s = summary(self.sweep(out, ranks=ranks))
            self.assertEqual((s["jobs_total"], s["ok"], s["failed"], s["workers"]), (36, 36, 0, workers), s)
            self.assertEqual(len(s["utilisation"]["per_worker"]), workers)
            recs = read_records(out, allow_torn=False)
            self.assertEqual(len(recs), 36)  # every job exactly once
            self.assertEqual(stable(recs), want, f"ranks={ranks}")
            self.assertTrue(all(re.fullmatch("[0-9a-f]{64}", r["record_sha256"]) for r in recs), recs[0])
            self.assertEqual({r["jobs_total"] for r in recs}, {36})  # how many jobs its sweep had
            ids = {r["sweep_id"] for r in recs}  # and which sweep: the one id of its directory
            self.assertEqual(len(ids), 1)
            self.assertRegex(ids.pop(), "^[0-9a-f]{32}$")
            for r in recs:
                self.assertTrue(os.path.exists(os.path.join(r["out"], "metrics.json")), r["out"])
                self.assertEqual(os.path.dirname(r["out"]), os.path.join(out, "runs"))
            self.assertEqual(len({r["rank"] for r in recs}), workers)
            with open(os.path.join(out, "plan.json")) as f:
                plan = json.load(f)
            self.assertEqual([m["name"] for m in plan["models"]], ["A", "B 2"])
            self.assertEqual([m["group"] for m in plan["models"]], ["", "G"])
            self.assertEqual(plan["seeds"], SEEDS)

    def test_a_record_changed_after_the_sweep_is_refused(self):
        """Each record carries the SHA-256 of its fields: a value edited in place (here an
        accuracy, within its range) is refused by `report` and by a restarted sweep, naming the
        line; the same values rewritten by another JSON writer are accepted."""
        out = self.out("sealed")
        self.sweep(out, ranks=2)
        path = os.path.join(out, "results.jsonl")
        with open(path) as f:
            lines = f.read().splitlines()
        r = json.loads(lines[4])
        # Another writer, other spacing and key order, the same values: still as written.
        rewritten = [json.dumps(json.loads(l), indent=None, sort_keys=False) for l in lines]
        self.assertNotEqual(rewritten[4], lines[4])
        copy = self.out("sealed-copy.jsonl")
        with open(copy, "w") as f:
            f.write("\n".join(rewritten) + "\n")
        p = run(["report", "--results", copy, "--plan", os.path.join(out, "plan.json"), "--out",
                 self.out("sealed-rep0"), "--no-png"], check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("record_sha256", p.stderr)
        edited = dict(r, accuracy=round(r["accuracy"], 2) + 0.001)  # a plausible value, within [0, 1]
        lines[4] = json.dumps(edited)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        want = f"{path}:5: the record is not as `genemask sweep` wrote it: its fields do not match its record_sha256"
        p = run(["report", "--results", path, "--out", self.out("sealed-rep"), "--no-png"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(want, p.stderr)
        self.assertFalse(os.path.exists(self.out("sealed-rep")))
        p = self.sweep(out, ranks=2, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(want, p.stderr)
        # Written by hand (no record_sha256) beside sealed records: reported, with a warning.
        del edited["record_sha256"]
        lines[4] = json.dumps(edited)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        p = run(["report", "--results", path, "--out", self.out("sealed-rep2"), "--no-png"], check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"{path}:5: 1 of the 36 records carry no record_sha256", p.stderr)

    def test_long_jobs_are_dispatched_first(self):
        # One worker runs the jobs in dispatch order: shots descending, then plan order.
        out = self.out("order")
        self.sweep(out, ranks=2, simulate="0.001")
        got = [r["job"] for r in read_records(out)]
        want = [f"{m['name']}|{t}|{s}|{seed}" for s in sorted(SHOTS, reverse=True) for m in MODELS for t in TASKS
                for seed in SEEDS]
        self.assertEqual(got, want)

    def test_yaml_plan_gives_the_same_records(self):
        lines = ["models:"] + [f"  - {{name: {m['name']}, path: random" +
                               "".join(f", {k}: {m[k]}" for k in ("config", "group") if k in m) + "}" for m in MODELS]
        lines += ["tasks:"] + [f"  - name: {t}\n    train: train.csv\n    test: test.csv" for t in TASKS]
        lines += [f"shots: [{', '.join(map(str, SHOTS))}]", f"seeds: {len(SEEDS)}"]
        plan = os.path.join(self.tmp, "plan.yml")
        with open(plan, "w") as f:
            f.write("\n".join(lines) + "\n")
        out = self.out("yaml")
        self.sweep(out, ranks=2, plan=plan)
        self.assertEqual(stable(read_records(out)), self.expected())

    def test_report_never_mixes_two_sweeps_fine_tuning_settings(self):
        # Two sweeps of other fine-tuning settings (and seeds), their results concatenated:
        # one mean per cell over both recipes, with no word, until records carried them.
        a, b = self.out("recipe-a"), self.out("recipe-b")
        self.sweep(a, plan=self.write_plan("recipe-a.json", seeds=[1, 2], finetune={"epochs": 3}))
        self.sweep(b, plan=self.write_plan("recipe-b.json", seeds=[3, 4], finetune={"epochs": 6, "lr": 0.001}))
        for out, epochs in ((a, 3), (b, 6)):
            self.assertEqual({r["finetune"]["epochs"] for r in read_records(out)}, {epochs})
        mixed = self.out("mixed.jsonl")
        with open(mixed, "w") as f:
            for out in (a, b):
                with open(os.path.join(out, "results.jsonl")) as g:
                    f.write(g.read())
        for plan in ([], ["--plan", os.path.join(a, "plan.json")]):
            p = run(["report", "--results", mixed, *plan, "--out", self.out("mixed-report"), "--no-png"], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("was fine-tuned with other settings than", p.stderr)
            self.assertIn("epochs 6 vs 3", p.stderr)
            self.assertFalse(os.path.exists(self.out("mixed-report")))
        # One sweep's records against another sweep's plan.json: refused too.
        p = run(["report", "--results", os.path.join(a, "results.jsonl"), "--plan", os.path.join(b, "plan.json"),
                 "--out", self.out("other-plan-report"), "--no-png"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("than the plan " + os.path.join(b, "plan.json") + " gives (epochs 3 vs 6, lr 0.0 vs 0.001)", p.stderr)
        run(["report", "--results", os.path.join(a, "results.jsonl"), "--out", self.out("own-report"), "--no-png"])

    def test_retry_then_ok_and_permanent_failure(self):
        out = self.out("retry")
        p = self.sweep(out, ranks=4, extra=["--inject-failure", "A|t1|10|1:1", "--inject-failure", "B 2|*|100|2:always"])
        s = summary(p)
        self.assertEqual((s["ok"], s["failed"], s["retried"]), (34, 2, 1 + 2 * 2), s)
        recs = read_records(out, allow_torn=False)
        self.assertEqual(len(recs), 36)  # a retried job that succeeds has only its ok line
        by_job = {r["job"]: r for r in recs}
        self.assertEqual(by_job["A|t1|10|1"]["attempts"], 2)
        self.assertEqual(by_job["A|t1|10|1"]["status"], "ok")
        for t in TASKS:
            r = by_job[f"B 2|{t}|100|2"]
            self.assertEqual((r["status"], r["attempts"], r["error"]), ("failed", 3, "injected failure (attempt 3)"))
            self.assertNotIn("accuracy", r)
        ok = [r for r in recs if r["status"] == "ok"]
        want = [w for w in self.expected() if not w["job"].startswith("B 2|") or "|100|2" not in w["job"]]
        for w in want:
            if w["job"] == "A|t1|10|1":
                w["attempts"] = 2
        self.assertEqual(stable(ok), want)
        # A restart runs only the failed jobs; readers take the last ok record per job.
        s = summary(self.sweep(out, ranks=2))
        self.assertEqual((s["jobs_skipped"], s["ok"], s["failed"]), (34, 2, 0), s)
        recs = read_records(out, allow_torn=False)
        self.assertEqual(len(recs), 38)
        want = self.expected()
        next(w for w in want if w["job"] == "A|t1|10|1")["attempts"] = 2
        self.assertEqual(stable(last_per_job(recs)), want)

    def test_strict_exits_non_zero_on_failure(self):
        for ranks in [None, 2]:
            out = self.out(f"strict{ranks}")
            p = self.sweep(out, ranks=ranks, extra=["--strict", "--inject-failure", "A|t2|1000|3:always"], check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("1 job(s) failed and 0 did not run (--strict)", p.stderr)
            self.assertEqual(summary(p)["failed"], 1)
            self.assertEqual(len(read_records(out, allow_torn=False)), 36)

    def test_all_jobs_failed_is_an_error_without_strict(self):
        # Regression: every job failed (a model that cannot load) and the sweep exited 0.
        for ranks in [None, 2]:
            out = self.out(f"allfailed{ranks}")
            p = self.sweep(out, ranks=ranks, extra=["--inject-failure", "*|*|*|*:always"], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"all 36 job(s) failed; the error of each is in {out}/results.jsonl", p.stderr)
            self.assertEqual((summary(p)["ok"], summary(p)["failed"]), (0, 36))
            # One job ok: the others' failures are reported, the sweep is not an error.
            out = self.out(f"onefailed{ranks}")
            p = self.sweep(out, ranks=ranks, extra=["--inject-failure", "A|*|*|*:always", "--inject-failure",
                                                    "B 2|t1|*|*:always", "--inject-failure", "B 2|t2|10|*:always",
                                                    "--inject-failure", "B 2|t2|100|*:always"], check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual((summary(p)["ok"], summary(p)["failed"]), (3, 33))

    def test_gpu_of_each_worker(self):
        # GPU = (rank among the workers of the node / ranks_per_gpu) % visible GPUs; the
        # manager (rank 0) takes none. Simulated jobs report the device they were given.
        for ranks, per_gpu, visible, want in [(4, 2, "0,1", {1: 0, 2: 0, 3: 1}),
                                              (5, 1, "3,5,7", {1: 0, 2: 1, 3: 2, 4: 0})]:
            plan = self.write_plan("gpu.json", device="cuda", ranks_per_gpu=per_gpu)
            out = self.out(f"gpu{ranks}")
            cmd = mpiexec(ranks) + [os.path.abspath(BIN), "sweep", "--plan", plan,
                                    "--out", out, "--simulate", "0.01", "--progress-every", "0"]
            p = subprocess.run(cmd, env=dict(ENV, CUDA_VISIBLE_DEVICES=visible), capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = {r["rank"]: r["device"] for r in read_records(out, allow_torn=False)}
            self.assertEqual(got, {r: f"cuda:{g}" for r, g in want.items()})

    def start(self, out, ranks, simulate):
        cmd = (mpiexec(ranks) if ranks else []) + [
            os.path.abspath(BIN), "sweep", "--plan", self.plan, "--out", out, "--simulate", simulate,
            "--progress-every", "0"]
        return subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def wait_for_lines(self, out, n, timeout=60):
        path = os.path.join(out, "results.jsonl")
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    if f.read().count("\n") >= n:
                        return
            time.sleep(0.02)
        self.fail(f"{path} did not reach {n} lines")

    def test_kill_9_mid_sweep_then_restart(self):
        # 1000-shot jobs take 0.6 s, 100-shot 0.06 s: kills land while jobs are in flight.
        for i, after_lines in enumerate([2, 8]):
            out = self.out(f"kill{i}")
            p = self.start(out, 4, "0.6")
            self.wait_for_lines(out, after_lines)
            for pid in session_pids(p.pid):  # mpirun and every rank, as a node failure would
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.communicate(timeout=30)
            before = read_records(out)  # raises on a corrupt line in the middle
            self.assertGreaterEqual(len(before), after_lines)
            self.assertLess(len(before), 36)
            s = summary(self.sweep(out, ranks=4))
            self.assertEqual(s["jobs_skipped"], len(before))
            self.assertEqual(s["ok"], 36 - len(before))
            recs = read_records(out, allow_torn=False)
            self.assertEqual(len(recs), 36)  # no job ran again after its ok record
            self.assertEqual(stable(recs), self.expected())

    def test_sigterm_stops_handing_out_jobs(self):
        # SIGUSR1 is Slurm's warning signal, which mpirun passes on to every rank.
        for ranks, sig in [(None, signal.SIGTERM), (4, signal.SIGTERM), (4, signal.SIGUSR1)]:
            out = self.out(f"term{ranks}-{int(sig)}")
            p = self.start(out, ranks, "0.6")
            self.wait_for_lines(out, 2)
            p.send_signal(sig)
            stdout, stderr = p.communicate(timeout=60)
            s = json.loads(stdout.strip().splitlines()[-1])
            self.assertTrue(s["interrupted"], s)
            # Stopped with jobs left: exit status 3, never 0 (that would read as finished).
            if ranks is None or sig == signal.SIGUSR1:
                self.assertEqual(p.returncode, 3, stderr)
            else:
                self.assertNotEqual(p.returncode, 0, stderr)
            recs = read_records(out, allow_torn=False)
            self.assertEqual(len(recs), s["ok"])  # the jobs in flight were written
            self.assertEqual(s["remaining"], 36 - s["ok"])
            self.assertGreater(s["remaining"], 0)
            s = summary(self.sweep(out, ranks=2))
            self.assertEqual((s["jobs_skipped"], s["ok"]), (len(recs), 36 - len(recs)))
            self.assertEqual(stable(read_records(out)), self.expected())

    def test_second_sweep_on_the_same_out_is_refused(self):
        out = self.out("locked")
        p = self.start(out, None, "0.6")
        try:
            self.wait_for_lines(out, 1)
            q = self.sweep(out, check=False)
            self.assertEqual(q.returncode, 1, q.stderr)
            self.assertIn(f"is in use by another genemask sweep (host {socket.gethostname()}, pid {p.pid})", q.stderr)
        finally:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=60)
        s = summary(self.sweep(out))  # the lock went with the process
        self.assertEqual(s["jobs_skipped"] + s["ok"], 36)

    def test_torn_last_line_is_repaired(self):
        out = self.out("torn")
        self.sweep(out)
        path = os.path.join(out, "results.jsonl")
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:-40])  # the last record loses its end and its newline
        with self.assertRaisesRegex(AssertionError, "torn last line"):
            read_records(out, allow_torn=False)
        s = summary(self.sweep(out, ranks=2))
        self.assertEqual((s["jobs_skipped"], s["ok"]), (35, 1))
        self.assertEqual(s["repaired_bytes"], len(data[:-40]) - data[:-40].rfind(b"\n") - 1)
        recs = read_records(out, allow_torn=False)
        self.assertEqual(len(recs), 36)
        self.assertEqual(stable(recs), self.expected())

    def test_a_hard_linked_snapshot_is_continued_without_touching_the_original(self):
        """A sweep continued in a `cp -al` snapshot of its DIR appended to the original's
        results.jsonl (one file under two names): the original reported jobs it never ran."""
        out = self.out("orig")
        self.sweep(out)
        path = os.path.join(out, "results.jsonl")
        with open(path, "rb") as f:
            lines = f.readlines()
        with open(path + ".new", "wb") as f:
            f.writelines(lines[:30])
        os.replace(path + ".new", path)  # 30 of 36 records
        snap = self.out("snap")
        shutil.copytree(out, snap, copy_function=os.link)
        self.assertEqual(os.stat(path).st_ino, os.stat(os.path.join(snap, "results.jsonl")).st_ino)
        s = summary(self.sweep(snap))
        self.assertEqual((s["jobs_skipped"], s["ok"]), (30, 6))
        with open(path, "rb") as f:
            self.assertEqual(f.readlines(), lines[:30])
        self.assertEqual(len(read_records(snap, allow_torn=False)), 36)
        # A user's folder holding a "runs" folder and other files is not an old sweep's DIR.
        mine = self.out("mine")
        os.makedirs(os.path.join(mine, "runs", "x"))
        with open(os.path.join(mine, "README.txt"), "w") as f:
            f.write("x")
        p = self.sweep(mine, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("is not a `genemask sweep` directory", p.stderr)
        self.assertEqual(sorted(os.listdir(mine)), ["README.txt", "runs"])
        # --out inside a task's directory (an input of every job) is refused before DIR is made.
        task_dir = self.out("taskdir")
        for shots in SHOTS:
            os.makedirs(os.path.join(task_dir, str(shots)))
            shutil.copy(os.path.join(self.tmp, "train.csv"), os.path.join(task_dir, str(shots), "train.tsv"))
        shutil.copy(os.path.join(self.tmp, "test.csv"), os.path.join(task_dir, "test.tsv"))
        plan = self.write_plan("inside.json", tasks=[{"name": "t", "dir": "taskdir"}])
        p = self.sweep(os.path.join(task_dir, "sweep"), plan=plan, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("the plan's task t", p.stderr)
        self.assertEqual(sorted(os.listdir(task_dir)), sorted([str(n) for n in SHOTS] + ["test.tsv"]))

    def test_records_are_held_against_their_jobs_when_plan_json_is_gone(self):
        """A sweep directory whose plan.json was removed (or lost) kept its records and
        skipped their jobs: records of a random "logo" model were reused (and averaged) for a
        random "dnabert" one of the same name, and records of other fine-tuning settings too.
        Each record is held against its job: the architecture by its digest, the settings."""
        out = self.out("no-plan")
        logo = self.write_plan("np-logo.json", models=[{"name": "R", "path": "random", "config": "logo"}])
        self.sweep(out, plan=logo)
        os.remove(os.path.join(out, "plan.json"))
        dnabert = self.write_plan("np-dnabert.json", models=[{"name": "R", "path": "random", "config": "dnabert"}])
        p = self.sweep(out, plan=dnabert, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("were run on other inputs than the plan's now", p.stderr)
        self.assertIn("job R|t1|1000|1 was run on another model (SHA-256 "
                      f"{builtin_sha256('logo')[:12]}...) than the plan's now ({builtin_sha256('dnabert')[:12]}...)",
                      p.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "plan.json")))  # a refused sweep writes none
        settings = self.write_plan("np-epochs.json", models=[{"name": "R", "path": "random", "config": "logo"}],
                                   finetune={"epochs": 3})
        p = self.sweep(out, plan=settings, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("was run with other fine-tuning settings", p.stderr)
        # --force moves the stale records aside and reruns their jobs.
        s = summary(self.sweep(out, plan=dnabert, extra=["--force"]))
        self.assertEqual((s["stale_records"], s["jobs_skipped"]), (len(TASKS) * len(SHOTS) * len(SEEDS), 0), s)

    def test_plan_changes(self):
        out = self.out("change")
        self.sweep(out)
        # Adding seeds (and a model) only adds jobs.
        more = self.write_plan("more.json", seeds=[1, 2, 3, 4],
                               models=MODELS + [{"name": "C", "path": "random", "config": "logo"}])
        s = summary(self.sweep(out, ranks=2, plan=more))
        self.assertEqual((s["jobs_total"], s["jobs_skipped"], s["ok"]), (72, 36, 36), s)
        self.assertEqual(stable(read_records(out)),
                         self.expected(models=MODELS + [{"name": "C", "path": "random"}], seeds=[1, 2, 3, 4]))
        # Each record says how many jobs the plan it ran under had.
        self.assertEqual([r["jobs_total"] for r in read_records(out)], [36] * 36 + [72] * 36)
        self.assertEqual(len({r["sweep_id"] for r in read_records(out)}), 1)  # a restart keeps the sweep's id
        # Changing a model's definition would mix results: an error unless --force.
        changed = self.write_plan("changed.json", seeds=[1, 2, 3, 4],
                                  models=[{"name": "A", "path": "random", "config": "dnabert"}, MODELS[1],
                                          {"name": "C", "path": "random"}])
        p = self.sweep(out, plan=changed, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.strip().splitlines()[-1],
                         f"genemask: error: {out}/plan.json: the plan {changed} changed incompatibly with this sweep's "
                         f"(model \"A\" changed: config \"logo\" -> \"dnabert\"); use another --out, or --force to "
                         "rerun the affected jobs (their old records move to results.stale.jsonl)")
        s = summary(self.sweep(out, ranks=4, plan=changed, extra=["--force"]))
        self.assertEqual((s["stale_records"], s["jobs_skipped"], s["ok"]), (24, 48, 24), s)
        self.assertEqual(len(read_records(out)), 72)
        with open(os.path.join(out, "results.stale.jsonl")) as f:
            self.assertEqual({json.loads(l)["model"] for l in f}, {"A"})


class SweepPlanErrors(SweepBase):
    def test_help(self):
        p = run(["sweep", "--help"])
        for opt in ["--plan", "--out", "--force", "--strict", "--progress-interval", "--quiet"]:
            self.assertIn(opt, p.stdout)

    def test_progress_options_as_in_every_command(self):
        # --progress-interval and --quiet as elsewhere; --progress-every stays as the older name.
        def lines(extra):
            out = self.out("progress" + "".join(extra).replace("-", ""))
            args = ["sweep", "--plan", self.plan, "--out", out, "--simulate", "0"] + extra
            return len(re.findall(r"^\[genemask sweep\] \d+/36 jobs done", run(args).stderr, re.M))
        self.assertGreaterEqual(lines(["--progress-interval", "0.000001"]), 2)  # a line at each update
        self.assertGreaterEqual(lines(["--progress-every", "0.000001"]), 2)
        self.assertEqual(lines(["--progress-interval", "0.000001", "--quiet"]), 0)
        self.assertEqual(lines(["--progress-interval", "0"]), 0)

    def test_bad_plan_stops_before_any_job(self):
        plan = self.write_plan("bad.json", tasks=[{"name": "t1", "train": "train.csv", "test": "missing.csv"}])
        for ranks in [None, 2]:
            out = self.out(f"bad{ranks}")
            p = self.sweep(out, ranks=ranks, plan=plan, check=False)
            self.assertNotEqual(p.returncode, 0)
            msg = (f"{plan}: tasks[0].test: \"missing.csv\" does not exist (expected a test table: "
                   f"{self.tmp}/missing.csv)")
            prefix = "genemask: error: " if ranks is None else "genemask[rank 0]: error: "
            self.assertIn(prefix + msg, p.stderr.splitlines())
            self.assertFalse(os.path.exists(os.path.join(out, "results.jsonl")))

    def test_yaml_error_names_the_line(self):
        plan = os.path.join(self.tmp, "bad.yaml")
        with open(plan, "w") as f:
            f.write("models:\n  - name: m\n    path: random\ntasks:\n  - {name: t, train: train.csv, test: test.csv}\n"
                    "shots: [10, ten]\n")
        p = self.sweep(self.out("badyaml"), plan=plan, check=False)
        self.assertEqual(p.stderr.strip(), f"genemask: error: {plan}:6: shots[1]: \"ten\" is not a positive integer")


TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


class SweepFinetune(unittest.TestCase):
    """Real fine-tuning of a tiny random model through libgenemask_model.so: the same
    metrics at 1 and 2 ranks, and metrics that agree with the saved predictions."""

    def test_real_finetune_same_at_1_and_2_ranks(self):
        import random
        import numpy as np
        tmp = tempfile.mkdtemp(prefix="genemask-sweep-ft-")
        self.addCleanup(shutil.rmtree, tmp, True)
        rng = random.Random(5)

        def seq(label):  # class 1 carries a TATA box
            s = [rng.choice("ACGT") for _ in range(40)]
            if label:
                i = rng.randrange(0, 34)
                s[i:i + 6] = "TATAAA"
            return "".join(s)
        for name, n in [("train.csv", 60), ("test.csv", 30)]:
            with open(os.path.join(tmp, name), "w") as f:
                f.write("sequence,label\n")
                for i in range(n):
                    f.write(f"{seq(i % 2)},{i % 2}\n")
        # The released few-shot layout too: quoted 6-mer TSV shot files, an unquoted dev.tsv.
        def kmers(s):
            return " ".join(s[i:i + 6] for i in range(len(s) - 5))
        for shots in (5, 10):
            os.makedirs(os.path.join(tmp, "lay", str(shots)))
            with open(os.path.join(tmp, "lay", str(shots), "train.tsv"), "w") as f:
                f.write('"sequence"\t"label"\n')
                for i in range(2 * shots):
                    f.write(f'"{kmers(seq(i % 2))}"\t"{i % 2}"\n')
        with open(os.path.join(tmp, "lay", "dev.tsv"), "w") as f:
            f.write("sequence\tlabel\n")
            for i in range(30):
                f.write(f"{kmers(seq(i % 2))}\t{i % 2}\n")
        with open(os.path.join(tmp, "tiny.json"), "w") as f:
            json.dump(TINY, f)
        plan = os.path.join(tmp, "plan.json")
        with open(plan, "w") as f:
            json.dump({"models": [{"name": "tiny", "path": "random", "config": "tiny.json"}],
                       "tasks": [{"name": "tata", "train": "train.csv", "test": "test.csv"},
                                 {"name": "tata-fixed", "dir": "lay"}],
                       "shots": [5, 10], "seeds": 2, "threads_per_worker": 1,
                       "finetune": {"epochs": 10, "lr": 0.002}}, f)
        # The plan leaves the precision out: auto, bf16 where the CPU has bf16 instructions.
        want = "fp32" if "bf16 instructions: none" in run(["--version"]).stdout else "bf16"
        results = {}
        for ranks in [1, 2]:
            out = os.path.join(tmp, f"np{ranks}")
            s = summary(run(["sweep", "--plan", plan, "--out", out, "--progress-every", "0", "--strict"], ranks=ranks))
            self.assertEqual((s["ok"], s["failed"]), (8, 0), s)
            recs = read_records(out, allow_torn=False)
            results[ranks] = stable(recs)
            for r in recs:
                self.assertEqual(r["n_train"], 2 * r["shots"])
                self.assertEqual(r["n_test"], 30)
                with open(os.path.join(r["out"], "metrics.json")) as f:
                    m = json.load(f)
                self.assertAlmostEqual(m["accuracy"], r["accuracy"], places=12)
                self.assertEqual((r["precision"], m["precision"]), (want, want))  # each record names it
                pred = np.genfromtxt(os.path.join(r["out"], "predictions.tsv"), delimiter="\t", names=True)
                probs = np.stack([pred["prob_0"], pred["prob_1"]], axis=1)
                acc = float(np.mean(np.argmax(probs, axis=1) == pred["label"]))
                self.assertAlmostEqual(acc, r["accuracy"], places=9)
        self.assertEqual(results[1], results[2])
        # An explicit precision reaches the workers (2 ranks: the job travels over MPI).
        for prec in ("bf16", "fp32"):
            with open(plan) as f:
                pj = json.load(f)
            pj.update(tasks=pj["tasks"][:1], shots=[5], seeds=1)
            pj["finetune"]["precision"] = prec
            pp, out = os.path.join(tmp, f"plan-{prec}.json"), os.path.join(tmp, f"prec-{prec}")
            with open(pp, "w") as f:
                json.dump(pj, f)
            run(["sweep", "--plan", pp, "--out", out, "--progress-every", "0", "--strict"], ranks=2)
            self.assertEqual([r["precision"] for r in read_records(out, allow_torn=False)], [prec])
        # A shot file of the layout that does not hold N per class (3 of each in 5/train.tsv) was
        # recorded as 5-shot, and published in Table 1's 5-shot rows: its job fails, saying why.
        os.makedirs(os.path.join(tmp, "lay-bad", "5"))
        with open(os.path.join(tmp, "lay", "5", "train.tsv")) as f:
            rows = f.read().splitlines()
        with open(os.path.join(tmp, "lay-bad", "5", "train.tsv"), "w") as f:
            f.write("\n".join(rows[:7]) + "\n")
        shutil.copy(os.path.join(tmp, "lay", "dev.tsv"), os.path.join(tmp, "lay-bad", "dev.tsv"))
        with open(plan) as f:
            pj = json.load(f)
        pj.update(tasks=[{"name": "short", "dir": "lay-bad"}], shots=[5], seeds=1)
        with open(os.path.join(tmp, "plan-bad.json"), "w") as f:
            json.dump(pj, f)
        s = summary(run(["sweep", "--plan", os.path.join(tmp, "plan-bad.json"), "--out", os.path.join(tmp, "bad"),
                         "--progress-every", "0"], check=False))
        self.assertEqual((s["ok"], s["failed"]), (0, 1), s)
        (r,) = read_records(os.path.join(tmp, "bad"), allow_torn=False)
        self.assertIn("lay-bad/5/train.tsv: holds 3 examples of class '0', but as the 5-shot training file of the "
                      "few-shot layout (DIR/5/train.tsv) it must hold 5 of each class", r["error"])
        # The sweep passes the plan's settings through: one job run by `genemask finetune`.
        for task, data in [("tata", ["--train", "train.csv", "--test", "test.csv", "--shots", "10"]),
                           ("tata-fixed", ["--train", "lay/10/train.tsv", "--test", "lay/dev.tsv"])]:
            one = os.path.join(tmp, f"one-{task}")
            run(["finetune", "--model", "random", "--config", "tiny.json", "--out", one, "--seed", "2", "--epochs", "10",
                 "--lr", "0.002", "--threads", "1"] + data, cwd=tmp)
            with open(os.path.join(one, "metrics.json")) as f:
                m = json.load(f)
            r = next(r for r in results[2] if r["job"] == f"tiny|{task}|10|2")
            for k in ["accuracy", "auc", "f1", "mcc", "n_test", "test_in_train", "test_duplicates", "truncated",
                      "unknown_only", "unterminated_tables"]:
                self.assertEqual(m[k], r[k], k)


if __name__ == "__main__":
    unittest.main(verbosity=2, defaultTest=["SweepSimulated", "SweepPlanErrors"])
