#!/usr/bin/env python3
"""Full disks and signals: what a command leaves behind when the disk fills or it is
stopped. A full disk (a 64 KiB tmpfs in a private mount namespace) and a file size limit
(ulimit -f) must give one line naming the file and the system's reason, exit 1 and leave
nothing; SIGTERM must print a line naming the signal and the unfinished output it removed
(exit status 128 + 15); after kill -9, the next run removes the dead process's temporary."""
import glob
import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from test_cli import BIN, ENV, mpiexec, run, summary


def unshare_works():
    """A private mount namespace where a tmpfs can be mounted (root, or a user namespace)."""
    for prefix in (["unshare", "--mount"], ["unshare", "--user", "--map-root-user", "--mount"]):
        p = subprocess.run(prefix + ["sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"], capture_output=True)
        if p.returncode == 0:
            return prefix
    return None


class Interrupts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-interrupts-")
        rng = random.Random(11)  # A/C/G/T only, so that shards keep most of it (~180 KB)
        cls.fa = os.path.join(cls.tmp, "g.fa")
        with open(cls.fa, "w") as f:
            for r in range(3):
                s = "".join(rng.choices("ACGT", k=30000))
                f.write(f">chr{r + 1}\n" + "".join(s[i:i + 60] + "\n" for i in range(0, len(s), 60)))
        cls.unshare = unshare_works()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def leftovers(self, d):
        return sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "*")))

    def error_line(self, p):
        lines = [l for l in p.stderr.splitlines() if not l.startswith("[")]
        self.assertEqual(len(lines), 1, p.stderr)
        return lines[0]

    def test_file_size_limit_names_the_file_and_reason(self):
        # EFBIG from write(2) once the file passes `ulimit -f` (SIGXFSZ ignored, as a shell
        # does when told to): counts.h5 (11 MiB at kmax 10) and shards.
        d = os.path.join(self.tmp, "fsize")
        os.makedirs(d)

        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

        out = os.path.join(d, "counts.h5")
        p = subprocess.run([os.path.abspath(BIN), "count", "--genome", self.fa, "--out", out, "--quiet"], env=ENV,
                           capture_output=True, text=True, preexec_fn=limit)
        self.assertEqual(p.returncode, 1, p.stderr)
        line = self.error_line(p)
        self.assertRegex(line, r"^genemask: error: .*/fsize/counts\.h5\.tmp\.[^ ]+\.\d+: cannot write the file "
                               r"\(\d+ bytes\): File too large \(a file size limit: ulimit -f\)$")
        self.assertEqual(self.leftovers(d), [])

    def test_file_size_limit_with_the_default_sigxfsz(self):
        # Started without a shell that ignores SIGXFSZ, whose default kills the process
        # without a word and leaves its temporaries: genemask ignores the signal itself, so
        # the write fails with EFBIG and is reported like a full disk (issue 21, item 8).
        d = os.path.join(self.tmp, "xfsz")
        os.makedirs(d)
        tiny = os.path.join(d, "tiny.json")
        with open(tiny, "w") as f:
            json.dump({"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
                       "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512}, f)
        src = os.path.join(self.tmp, "xfsz-src")
        os.makedirs(src)
        shards, runs = os.path.join(src, "shards"), os.path.join(src, "run")
        run(["shards", "--genome", self.fa, "--out", shards, "--max-tokens", "60", "--min-tokens", "20"])
        pretrain = ["pretrain", "--shards", shards, "--model", tiny, "--masking", "random", "--steps", "2",
                    "--warmup", "1", "--batch-per-rank", "2", "--grad-accum", "1", "--eval-every", "0",
                    "--threads", "1"]
        run(pretrain + ["--out", runs])
        plan = os.path.join(src, "plan.yaml")
        with open(plan, "w") as f:
            f.write(f"models:\n  - {{name: m, path: random, config: {tiny}}}\n"
                    f"tasks:\n  - {{name: t, train: {plan}, test: {plan}}}\nshots: [10]\nseeds: 40\n")
        cases = [  # command, file size limit in bytes
            (["count", "--genome", self.fa, "--out", f"{d}/counts.h5", "--quiet"], 1 << 20),
            (["shards", "--genome", self.fa, "--out", f"{d}/shards"], 64 << 10),
            (["export-hf", "--run", runs, "--out", f"{d}/hf"], 64 << 10),
            (pretrain + ["--out", f"{d}/run"], 64 << 10),
            # model.safetensors (~0.6 MiB) fits, optimizer.pt (~1.3 MiB) does not: LibTorch's
            # writer found the failure in its destructor (an abort, step-N.tmp left).
            (pretrain + ["--out", f"{d}/run-optimizer"], 1 << 20),
            (["sweep", "--plan", plan, "--out", f"{d}/sweep", "--simulate", "0", "--progress-every", "0"], 4 << 10),
        ]
        for argv, limit in cases:
            with self.subTest(argv[0]):
                def set_limit(n=limit):
                    resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
                    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)

                p = subprocess.run([os.path.abspath(BIN)] + argv, env=ENV, capture_output=True, text=True,
                                   preexec_fn=set_limit, timeout=300)
                self.assertEqual(p.returncode, 1, f"killed by a signal? {p.returncode}\n{p.stderr}")
                line = self.error_line(p)
                self.assertTrue(line.startswith("genemask: error: "), line)
                self.assertIn("File too large", line)
                self.assertIn(d, line)  # the file that could not be written
                left = [os.path.relpath(os.path.join(r, n), d) for r, ds, fs in os.walk(d) for n in ds + fs
                        if ".tmp." in n or n.endswith(".tmp") or n in (".genemask-staging", ".genemask.lock")]
                self.assertEqual(left, [])

    def test_a_lock_file_that_cannot_be_written_leaves_no_directory(self):
        # `ulimit -f 0`: the lock file of a new --out cannot be written. The command says so,
        # and the directory it made for --out (with its parents) goes again: it was left
        # empty by every command.
        d = os.path.join(self.tmp, "nolock")
        os.makedirs(d)
        shards = os.path.join(self.tmp, "nolock-shards")
        run(["shards", "--genome", self.fa, "--out", shards, "--max-tokens", "60", "--min-tokens", "20"])

        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

        for argv in (["shards", "--genome", self.fa, "--out", f"{d}/a/shards"],
                     ["pretrain", "--shards", shards, "--model", "dnabert", "--steps", "1", "--out", f"{d}/b/run"]):
            with self.subTest(argv[0]):
                p = subprocess.run([os.path.abspath(BIN)] + argv, env=ENV, capture_output=True, text=True,
                                   preexec_fn=limit, timeout=120)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn("cannot write the lock file: File too large", p.stderr)
                self.assertEqual(self.leftovers(d), [])

    def test_a_signal_to_one_sweep_worker_stops_the_sweep(self):
        # SIGTERM to one worker rank (not to mpirun): the manager hands out no new job, the
        # running ones are recorded, every rank exits with status 3; the next run does the
        # rest, and no job is run twice (issue 21, item 21).
        d = os.path.join(self.tmp, "sweep-term")
        os.makedirs(d)
        plan = os.path.join(d, "plan.yaml")
        with open(plan, "w") as f:
            f.write(f"models:\n  - {{name: m, path: random}}\n"
                    f"tasks:\n  - {{name: t, train: {plan}, test: {plan}}}\nshots: [10]\nseeds: 16\n")
        out = os.path.join(d, "out")
        # --simulate 100: a 10-shot job sleeps 1 s.
        argv = mpiexec(3) + [os.path.abspath(BIN), "sweep", "--plan", plan, "--out", out,
                             "--simulate", "100", "--progress-every", "0"]
        p = subprocess.Popen(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        results = os.path.join(out, "results.jsonl")
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(results) and os.path.getsize(results) > 0):
            time.sleep(0.1)
        worker = None
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if out.encode() in cmd and b"OMPI_COMM_WORLD_RANK=2" in env and cmd[0].endswith(b"genemask"):
                worker = int(pid)
        self.assertIsNotNone(worker, "worker rank 2 not found")
        os.kill(worker, signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            self.fail("the sweep did not stop after SIGTERM to a worker")
        self.assertEqual(p.returncode, 3, err)
        self.assertIn("rank 2 on ", err)
        self.assertIn("was stopped by signal 15", err)
        with open(results) as f:
            first = [json.loads(l)["job"] for l in f]
        self.assertLess(len(first), 16)
        self.assertEqual(len(first), len(set(first)))
        r = run(["sweep", "--plan", plan, "--out", out, "--simulate", "0", "--progress-every", "0"])
        self.assertEqual(summary(r)["jobs_skipped"], len(first))
        with open(results) as f:
            jobs = [json.loads(l)["job"] for l in f]
        self.assertEqual(len(jobs), 16)
        self.assertEqual(len(set(jobs)), 16)

    def test_a_rank_that_hangs_ends_the_job_after_the_mpi_timeout(self):
        # Rank 1 is held back 60 s before its first reduction (a hung rank, or one behind a
        # failed link): rank 0 waits GENEMASK_MPI_TIMEOUT = 3 s, says so, removes nothing it
        # did not write, exits 75, and the launcher ends rank 1. (tests/jobs/test_multihost.sh
        # does the same across hosts, and with a cut link.)
        d = os.path.join(self.tmp, "hang")
        os.makedirs(d)
        out = os.path.join(d, "counts.h5")
        t0 = time.time()
        p = run(["count", "--genome", self.fa, "--out", out, "--kmax", "6", "--quiet"], ranks=2, check=False,
                env={"GENEMASK_MPI_TIMEOUT": "3", "GENEMASK_TEST_COLLECTIVE_DELAY": "1:MPI_Reduce:60"})
        took = time.time() - t0
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertLess(took, 30, p.stderr)
        self.assertRegex(p.stderr, r"genemask\[rank 0\]: error: rank 0 of 2 on host \S+ waited [34] s in MPI_Reduce "
                                   r"without an answer from the other ranks: .* Ending the job \(exit status 75\)\. "
                                   r"The limit is GENEMASK_MPI_TIMEOUT=3 seconds \(0: no limit\)")
        self.assertEqual(self.leftovers(d), [])
        # Without the hook the same command passes: the watchdog does not fire on waits that end.
        run(["count", "--genome", self.fa, "--out", out, "--kmax", "6", "--quiet"], ranks=2,
            env={"GENEMASK_MPI_TIMEOUT": "5"})
        self.assertEqual(self.leftovers(d), ["counts.h5"])

    def test_a_bad_mpi_timeout_is_refused_before_anything_runs(self):
        d = os.path.join(self.tmp, "bad-timeout")
        os.makedirs(d)
        p = run(["count", "--genome", self.fa, "--out", os.path.join(d, "c.h5"), "--kmax", "4"], ranks=2,
                check=False, env={"GENEMASK_MPI_TIMEOUT": "10min"})
        self.assertEqual(p.returncode, 1)
        self.assertIn("GENEMASK_MPI_TIMEOUT='10min': not a whole number of seconds from 0 to 1000000000", p.stderr)
        self.assertEqual(self.leftovers(d), [])

    @unittest.skipUnless(shutil.which("unshare"), "unshare (util-linux) is missing")
    def test_full_disk_names_the_file_and_says_so(self):
        if self.unshare is None:
            self.fail("cannot mount a tmpfs in a private mount namespace here (needed to fill a disk safely)")
        d = os.path.join(self.tmp, "full")
        os.makedirs(d)
        for name, args in [("counts", ["count", "--genome", self.fa, "--out", f"{d}/counts.h5", "--quiet"]),
                           ("shards", ["shards", "--genome", self.fa, "--out", f"{d}/shards"])]:
            with self.subTest(name):
                # The genome is read from outside; the output directory is a 64 KiB tmpfs.
                script = f'mount -t tmpfs -o size=64k tmpfs "{d}" && exec "$0" "$@"'
                p = subprocess.run(self.unshare + ["sh", "-c", script, os.path.abspath(BIN)] + args, env=ENV,
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 1, p.stderr)
                line = self.error_line(p)
                self.assertIn(f"{d}/", line)
                self.assertIn("No space left on device (the disk is full)", line)
                self.assertRegex(line, r"\.tmp\.[^ ]+\.\d+: cannot write the file \(\d+ bytes\): ")
        # The tmpfs went with the namespace: nothing was written to the real directory.
        self.assertEqual(self.leftovers(d), [])

    def test_sigterm_removes_the_unfinished_output(self):
        d = os.path.join(self.tmp, "term")
        os.makedirs(d)
        out = os.path.join(d, "counts.h5")
        p = subprocess.Popen([os.path.abspath(BIN), "count", "--genome", self.fa, "--out", out, "--quiet"],
                             env=dict(ENV, GENEMASK_TEST_HOLD_TEMP="30"), stderr=subprocess.PIPE, text=True)
        line = p.stderr.readline()
        self.assertTrue(line.startswith("genemask: holding "), line)
        tmp = line.split("holding ", 1)[1].strip()
        self.assertTrue(os.path.exists(tmp))
        self.assertEqual(os.path.basename(tmp), f"counts.h5.tmp.{socket.gethostname()}.{p.pid}")
        p.send_signal(signal.SIGTERM)
        rest = p.stderr.read()
        self.assertEqual(p.wait(), -signal.SIGTERM)
        self.assertEqual(rest, f"genemask: stopped by SIGTERM; removed the unfinished {tmp}\n")
        self.assertEqual(self.leftovers(d), [])

    def test_kill_9_leftover_is_removed_by_the_next_run(self):
        d = os.path.join(self.tmp, "kill")
        os.makedirs(d)
        out = os.path.join(d, "counts.h5")
        p = subprocess.Popen([os.path.abspath(BIN), "count", "--genome", self.fa, "--out", out, "--quiet"],
                             env=dict(ENV, GENEMASK_TEST_HOLD_TEMP="30"), stderr=subprocess.PIPE, text=True)
        tmp = p.stderr.readline().split("holding ", 1)[1].strip()
        p.kill()
        p.wait()
        p.stderr.close()
        self.assertTrue(os.path.exists(tmp))  # kill -9 runs no handler
        # A live process's temporary (this test's own pid) and another host's are not touched.
        live = f"{out}.tmp.{socket.gethostname()}.{os.getpid()}"
        other = f"{out}.tmp.another-node.{p.pid}"
        for f in (live, other):
            open(f, "w").close()
        r = run(["count", "--genome", self.fa, "--out", out, "--quiet"])
        self.assertIn(f"genemask: removed {tmp}, an unfinished output of process {p.pid} that no longer runs",
                      r.stderr)
        self.assertEqual(summary(r)["command"], "count")
        self.assertEqual(self.leftovers(d), sorted(os.path.basename(f) for f in (out, live, other)))


if __name__ == "__main__":
    unittest.main()
