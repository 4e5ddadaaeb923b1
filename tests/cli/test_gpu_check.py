#!/usr/bin/env python3
"""scripts/gpu-check.sh on the CPU (--cpu --no-build, one timed step):
- as a dry run: every part passes (the build skipped by --no-build), the GPU tests run
  their bodies on the CPU (passed, not skipped), both configs are benchmarked against
  Python PyTorch, and the JSON holds what the table prints, with the model FLOPs per
  token of the closed form in docs/build.md;
- the same inside an srun step (`srun --gpus=1 scripts/gpu-check.sh`, as docs/build.md
  says): srun's variables (SLURM_NTASKS=1, SLURM_PROCID=0, PMI_SIZE=1, ...) must not
  break the inner `mpiexec -n 2` nor the single-rank commands;
- with parts that fail (a fake build directory and a Python whose benchmarks fail): every
  part still runs and reports its status and exit code, the JSON is written with the
  rows that exist, and the exit code is 1;
- a target that does not build (a stand-in cmake): the build part fails and the parts of
  that program are skipped, naming it, while the others run;
- a TERM or an INT while a part runs: the part's whole process group is stopped, the part
  is recorded as failed ("interrupted"), the JSON is written from the parts before it
  (interrupted names the signal and the part; passed is false), and the exit code is
  128 + the signal's number; also in a GPU-only part (a stand-in Python that reports
  CUDA): the kernels part keeps its "interrupted" note;
- --genome: the pretrain part (`genemask pretrain` on real shards, as bench/paper_scale.sh
  runs it) reports its real tokens/s and model TFLOP/s against the synthetic step's at the
  same batch; without --genome it is skipped with the reason;
- a Python without numpy and h5py: one message naming both, exit 2, before any part;
- --peak-tflops not a finite number above 0: exit 2 before any part; a crash of the report
  itself says "the report failed"; the report on made-up part outputs: a graph row whose
  losses differ from the eager step's is in no figure (runs, best, ratios), only in
  "rejected"; the small benchmarks' (train_bench, mask_bench, allreduce_bench) bad
  arguments refused with one line and exit 2;
- statically: tests/cli/test_gpu.py has no "no GPU: exit 77" path left, and gpu-check.sh's
  module list covers every module the GPU tests and the benchmark import."""
import ast
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "gpu-check.sh")
BUILD = os.environ.get("GENEMASK_BUILD_DIR", os.path.join(ROOT, "build"))
CONFIGS = {"dnabert": (768, 12, 3072), "logo": (256, 2, 3072)}
PARTS = ["build", "model_tests", "gpu_tests"] + [f"pretrain_{c}" if p == "pretrain" else f"bench_{c}_{p}"
                                                 for c in ("dnabert", "logo")
                                                 for p in ("genemask", "graph", "no_ln_bf16", "no_gelu", "bgrad", "no_ln_smem", "no_ln_lean", "no_bias_sum", "no_ce", "ce_pad", "gemm_gelu",
                                                           "no_weight_bf16", "gelu_rows2", "gelu_rows4", "packing",
                                                           "pytorch",
                                                           "sweep", "kernels", "pretrain")]
# The GPU tests' count, from test_gpu.py itself: all of them must run (on the CPU here).
with open(os.path.join(ROOT, "tests", "cli", "test_gpu.py")) as _f:
    GPU_TESTS = sum(1 for n in ast.walk(ast.parse(_f.read()))
                    if isinstance(n, ast.FunctionDef) and n.name.startswith("test_"))
GPU_ONLY = {"bench_dnabert_graph": "no CUDA graph on the CPU", "bench_logo_graph": "no CUDA graph on the CPU",
            "bench_dnabert_no_ln_bf16": "the bf16 copy is the GPU kernel's",
            "bench_logo_no_ln_bf16": "the bf16 copy is the GPU kernel's",
            "bench_dnabert_no_gelu": "the fused bias + GELU is a GPU kernel",
            "bench_logo_no_gelu": "the fused bias + GELU is a GPU kernel",
            "bench_dnabert_bgrad": "the bias gradient in cuBLASLt's epilogue is a GPU product",
            "bench_logo_bgrad": "the bias gradient in cuBLASLt's epilogue is a GPU product",
            "bench_dnabert_no_ln_smem": "the fused LayerNorm is a GPU kernel",
            "bench_logo_no_ln_smem": "the fused LayerNorm is a GPU kernel",
            "bench_dnabert_no_ln_lean": "the fused LayerNorm is a GPU kernel",
            "bench_logo_no_ln_lean": "the fused LayerNorm is a GPU kernel",
            "bench_dnabert_no_bias_sum": "the column-sum kernel runs on a GPU",
            "bench_logo_no_bias_sum": "the column-sum kernel runs on a GPU",
            "bench_dnabert_no_ce": "the fused cross-entropy is a GPU kernel",
            "bench_logo_no_ce": "the fused cross-entropy is a GPU kernel",
            "bench_dnabert_ce_pad": "the decoder's padded classes apply on a GPU",
            "bench_logo_ce_pad": "the decoder's padded classes apply on a GPU",
            "bench_dnabert_gemm_gelu": "the fused products are Hopper GPU kernels",
            "bench_logo_gemm_gelu": "the fused products are Hopper GPU kernels",
            "bench_dnabert_no_weight_bf16": "its ablation runs in the CUDA graph",
            "bench_logo_no_weight_bf16": "its ablation runs in the CUDA graph",
            "bench_dnabert_gelu_rows2": "the fused bias + GELU is a GPU kernel",
            "bench_logo_gelu_rows2": "the fused bias + GELU is a GPU kernel",
            "bench_dnabert_gelu_rows4": "the fused bias + GELU is a GPU kernel",
            "bench_logo_gelu_rows4": "the fused bias + GELU is a GPU kernel",
            "bench_dnabert_sweep": "the micro-batch sweep runs on a GPU",
            "bench_logo_sweep": "the micro-batch sweep runs on a GPU",
            "bench_dnabert_kernels": "genemask's CUDA kernels run on a GPU",
            "bench_logo_kernels": "genemask's CUDA kernels run on a GPU"}
# Without --genome the pretrain parts are skipped, with the reason.
NO_GENOME = {f"pretrain_{c}": "no genome: --genome FASTA (scripts/default-genome.sh makes human chr22)"
             for c in ("dnabert", "logo")}
SKIPPED = {**GPU_ONLY, **NO_GENOME}
# What `srun --gpus=1 --mpi=pmi2 scripts/gpu-check.sh` puts into the script's environment
# that bears on an MPI world's size and rank. (srun also sets SLURM_NODELIST; together with
# PMI_SIZE it makes an Open MPI built without Slurm support, as Debian's, refuse to start
# a singleton: "direct launched using srun, but OMPI was not built with SLURM support".)
SRUN_ENV = {"SLURM_NTASKS": "1", "SLURM_NPROCS": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
            "SLURM_NODEID": "0", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_STEP_NUM_NODES": "1",
            "SLURM_JOB_ID": "424242", "SLURM_NNODES": "1", "SLURM_TASKS_PER_NODE": "1", "PMI_SIZE": "1",
            "PMI_RANK": "0", "SLURM_NODELIST": "node1", "SLURM_JOB_NODELIST": "node1",
            "SLURM_STEP_NODELIST": "node1"}


def gpu_check(out, *args, env=None, build=BUILD, python=sys.executable):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_"))}
    e.update(CUDA_VISIBLE_DEVICES="", **(env or {}))
    return subprocess.run(["bash", SCRIPT, "--cpu", "--no-build", "--build", build, "--python", python,
                           "--out", out, *args], capture_output=True, text=True, env=e)


class GpuCheckDryRun(unittest.TestCase):
    def dry_run(self, env=None):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "gpu-check.json")
            p = gpu_check(out, "--steps", "1", env=env)
            log = p.stdout + p.stderr
            with open(out) as f:
                res = json.load(f)
        parts = res["parts"]
        self.assertEqual(list(parts), PARTS)
        self.assertEqual(parts["build"], {"status": "skipped", "exit_code": None, "seconds": 0, "note": "--no-build"})
        for name in PARTS[1:]:
            if name in SKIPPED:  # skipped on the CPU, or without a genome, with the reason
                self.assertEqual(parts[name], {"status": "skipped", "exit_code": None, "seconds": 0,
                                               "note": SKIPPED[name]}, log)
                continue
            self.assertEqual((name, parts[name]["status"], parts[name]["exit_code"]), (name, "passed", 0), log)
        self.assertTrue(res["passed"])
        self.assertEqual(p.returncode, 0, log)
        self.assertIn("genemask / PyTorch", p.stdout)
        self.assertIn("gpu-check: every part passed", p.stdout)
        # The GPU tests ran their bodies on the CPU: passed, not skipped.
        self.assertEqual(res["gpu_tests"], "passed")
        self.assertGreaterEqual(GPU_TESTS, 9)
        self.assertRegex(p.stderr, rf"Ran {GPU_TESTS} tests in")
        self.assertRegex(p.stderr, r"(?m)^OK$")  # not "OK (skipped=...)"
        return res, p

    def test_dry_run(self):
        res, p = self.dry_run()
        self.assertEqual(res["device"], "cpu")
        runs = {(r["impl"], r["config"]): r for r in res["runs"]}
        self.assertEqual(set(runs), {(i, c) for i in ("genemask", "pytorch") for c in CONFIGS})
        for (impl, cfg), r in runs.items():
            self.assertEqual(r["seq"], 512)
            self.assertGreater(r["median_tokens_per_s"], 0)
            if impl != "genemask":
                continue
            H, L, F = CONFIGS[cfg]
            m = r["masked_fraction"]
            self.assertTrue(0.1 < m < 0.2, m)
            want = 3 * (L * (8 * H * H + 4 * H * F + 4 * 512 * H) + m * 2 * (H * H + H * 4101))
            self.assertAlmostEqual(r["flops_per_token"], want, delta=1e-3 * want)
            self.assertAlmostEqual(r["ratio_vs_pytorch"],
                                   r["median_tokens_per_s"] / runs[("pytorch", cfg)]["median_tokens_per_s"], places=6)
            self.assertIsNone(r["mfu"])  # no peak on a CPU
            self.assertIsNone(r["mfu_datasheet"])
            self.assertEqual(r["variant"], "eager")
            self.assertGreater(sum(r["breakdown_s"].values()), 0)
            # The profile of the step: every class, the operators' own times within the step.
            prof = r["profile"]
            self.assertEqual(sorted(prof["seconds_per_step"]),
                             sorted(["matmul", "attention", "elementwise_norm", "optimizer", "copies_casts", "idle"]))
            self.assertGreater(prof["seconds_per_step"]["matmul"], 0)
            self.assertLessEqual(sum(prof["seconds_per_step"].values()), prof["step_s"] * 1.05)
            self.assertTrue(prof["top"])
        self.assertIn("where a step's time goes", p.stdout)
        # Samples of uniform lengths, padded and packed: the same real tokens, fewer positions
        # packed, and the ratio of the two runs' real tokens/s.
        for cfg in CONFIGS:
            pk = res["packing"][cfg]
            padded, packed = pk["padded"], pk["packed"]
            self.assertEqual((padded["lengths"], packed["lengths"]), ("uniform", "uniform"))
            self.assertEqual((padded["packing"], packed["packing"]), (False, True))
            self.assertEqual((padded["packed_attention"], packed["packed_attention"]), ([], ["cpu-segments"]))
            self.assertEqual(padded["real_tokens"], packed["real_tokens"])
            self.assertLessEqual(packed["positions"], padded["positions"])
            self.assertLessEqual(padded["real_tokens"], padded["positions"])
            self.assertAlmostEqual(pk["packed_vs_padded"],
                                   packed["median_tokens_per_s"] / padded["median_tokens_per_s"], places=6)
            self.assertIn(f"{cfg:8s} packed / padded:", p.stdout)

    def test_dry_run_inside_an_srun_step(self):
        # `srun --gpus=1 scripts/gpu-check.sh`: the GPU tests' `mpiexec -n 2` is a launch
        # nested in a one-task step (it used to stop with "SLURM_NTASKS=1 but MPI sees 2"),
        # and single-rank commands must not start MPI inside the step (Debian's Open MPI,
        # built without Slurm support, refuses to start under srun's SLURM_NODELIST+PMI_SIZE).
        self.dry_run(env=SRUN_ENV)

    def test_failing_parts_do_not_stop_the_others(self):
        with tempfile.TemporaryDirectory() as tmp:
            build = os.path.join(tmp, "build")
            # A build directory whose model_tests fail, whose genemask runs only --version,
            # and without train_bench.
            def script(path, body):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write("#!/bin/sh\n" + body)
                os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
            script(os.path.join(build, "tests", "model_tests"), "echo model_tests broken >&2; exit 3\n")
            script(os.path.join(build, "src", "cli", "genemask"),
                   '[ "$1" = --version ] && { echo "genemask 0"; echo "GPUs visible: 0"; exit 0; }\n'
                   'echo "genemask: error: broken" >&2; exit 1\n')
            # A Python whose dnabert benchmark fails and whose logo benchmark gives a row.
            row = json.dumps({"impl": "pytorch", "config": "logo", "batch": 2, "seq": 512, "median_tokens_per_s": 100.0,
                              "median_step_s": 10.24, "peak_memory_gib": 0.0})
            script(os.path.join(tmp, "python"),
                   'case "$1" in *train_bench.py) [ "$2" = logo ] || exit 5; echo \'%s\'; exit 0 ;; esac\n'
                   'exec "%s" "$@"\n' % (row, sys.executable))
            out = os.path.join(tmp, "gpu-check.json")
            p = gpu_check(out, "--steps", "1", build=build, python=os.path.join(tmp, "python"))
            log = p.stdout + p.stderr
            self.assertEqual(p.returncode, 1, log)
            with open(out) as f:
                res = json.load(f)
        parts = res["parts"]
        self.assertEqual(list(parts), PARTS, log)
        got = {n: (v["status"], v["exit_code"]) for n, v in parts.items()}
        self.assertEqual(got, {"build": ("skipped", None), "model_tests": ("failed", 3), "gpu_tests": ("failed", 1),
                               "bench_dnabert_genemask": ("failed", 127), "bench_dnabert_pytorch": ("failed", 5),
                               "bench_dnabert_packing": ("failed", 127), "bench_logo_packing": ("failed", 127),
                               "bench_logo_genemask": ("failed", 127), "bench_logo_pytorch": ("passed", 0),
                               **{n: ("skipped", None) for n in SKIPPED}}, log)
        self.assertIn("train_bench is missing", parts["bench_logo_genemask"]["note"])
        self.assertFalse(res["passed"])
        self.assertEqual(res["gpu_tests"], "failed")
        self.assertEqual([(r["impl"], r["config"]) for r in res["runs"]], [("pytorch", "logo")])
        self.assertIn("logo     genemask  (no result: failed)", p.stdout)
        self.assertIn("gpu-check: 7 part(s) failed: model_tests, gpu_tests, bench_dnabert_genemask, "
                      "bench_dnabert_packing, bench_dnabert_pytorch, bench_logo_genemask, bench_logo_packing", p.stdout)
        for name in PARTS:  # the status table
            self.assertRegex(p.stdout, rf"(?m)^{name} +{parts[name]['status']} ")

    def test_a_target_that_does_not_build_skips_its_parts(self):
        with tempfile.TemporaryDirectory() as tmp:
            bindir = os.path.join(tmp, "bin")
            os.makedirs(bindir)
            # A cmake that configures, builds every target but train_bench, and fails that one.
            with open(os.path.join(bindir, "cmake"), "w") as f:
                f.write('#!/bin/sh\nfor a in "$@"; do [ "$a" = train_bench ] && { echo "no train_bench" >&2; exit 2; }; done\n'
                        'exit 0\n')
            os.chmod(os.path.join(bindir, "cmake"), 0o755)
            build = os.path.join(tmp, "build")
            os.makedirs(os.path.join(build, "tests"))
            with open(os.path.join(build, "tests", "model_tests"), "w") as f:
                f.write("#!/bin/sh\nexit 0\n")
            os.chmod(os.path.join(build, "tests", "model_tests"), 0o755)
            out = os.path.join(tmp, "gpu-check.json")
            e = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_"))}
            e.update(CUDA_VISIBLE_DEVICES="", PATH=bindir + os.pathsep + e["PATH"])
            p = subprocess.run(["bash", SCRIPT, "--cpu", "--build", build, "--python", sys.executable, "--out", out,
                                "--only", "model_tests,bench_dnabert_genemask,bench_logo_packing"],
                               capture_output=True, text=True, env=e)
            log = p.stdout + p.stderr
            self.assertEqual(p.returncode, 1, log)
            with open(out) as f:
                parts = json.load(f)["parts"]
        self.assertEqual((parts["build"]["status"], parts["build"]["exit_code"]), ("failed", 2), log)
        self.assertEqual(parts["model_tests"]["status"], "passed", log)
        for n in ("bench_dnabert_genemask", "bench_logo_packing"):
            self.assertEqual((parts[n]["status"], parts[n]["note"]), ("skipped", "train_bench did not build"), log)
        self.assertIn("no train_bench", log)

    def test_a_signal_stops_the_running_part_and_keeps_the_report(self):
        import signal
        import time
        for sig, only, first in ((signal.SIGTERM, "model_tests,bench_dnabert_genemask,bench_logo_genemask",
                                  "model_tests"),
                                 (signal.SIGINT, "bench_dnabert_genemask,bench_logo_genemask", None)):
            with self.subTest(signal=sig.name), tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "gpu-check.json")
                e = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_"))}
                e.update(CUDA_VISIBLE_DEVICES="")
                # Enough steps that the first benchmark is still running when the signal comes.
                # INT as a terminal delivers it: a shell started in the background of a
                # non-interactive one (as CI's may be) inherits it ignored, and an ignored
                # signal cannot be trapped.
                p = subprocess.Popen(["bash", SCRIPT, "--cpu", "--no-build", "--build", BUILD, "--python",
                                      sys.executable, "--out", out, "--steps", "1000", "--only", only],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
                running = only.split(",")[1 if first else 0]
                log = []
                for line in p.stdout:
                    log.append(line)
                    if line.strip() == f"== {running}":
                        break
                time.sleep(3)  # train_bench started and busy
                bench = f"{BUILD}/bench/train_bench {running.split('_')[1]}"
                self.assertEqual(subprocess.run(["pgrep", "-f", bench], capture_output=True).returncode, 0,
                                 "".join(log))
                p.send_signal(sig)
                log.append(p.stdout.read())
                p.stdout.close()
                rc = p.wait(timeout=60)
                log = "".join(log)
                self.assertEqual(rc, 128 + sig, log)
                time.sleep(0.5)
                # The part's whole process group stopped: no train_bench left.
                self.assertNotEqual(subprocess.run(["pgrep", "-f", bench], capture_output=True).returncode, 0, log)
                with open(out) as f:
                    res = json.load(f)
                self.assertEqual(res["interrupted"], f"{sig.name} during part {running}", log)
                self.assertFalse(res["passed"])
                parts = res["parts"]
                self.assertEqual((parts[running]["status"], parts[running]["note"]),
                                 ("failed", f"interrupted by {sig.name} (stopped)"))
                if first:
                    self.assertEqual(parts[first]["status"], "passed", log)
                later = only.split(",")[-1]
                self.assertNotIn(later, parts)  # never started
                self.assertIn(f"gpu-check: interrupted by {sig.name} during part {running}; the parts after it did not run",
                              log)
                self.assertEqual(res["runs"], [])

    def test_a_signal_during_a_gpu_only_part_keeps_its_note(self):
        # The kernels part runs only on a GPU: a Python that says CUDA is there, and a
        # kernel_bench that starts and then waits. Stopped before its JSON line, the part
        # keeps "interrupted" as its note (the report must not call it "no result line").
        import signal
        import time
        with tempfile.TemporaryDirectory() as tmp:
            build = os.path.join(tmp, "build")
            os.makedirs(os.path.join(build, "bench"))
            bench = os.path.join(build, "bench", "kernel_bench")
            with open(bench, "w") as f:
                f.write("#!/bin/sh\necho started\nexec sleep 300\n")
            os.chmod(bench, 0o755)
            py = os.path.join(tmp, "python")
            with open(py, "w") as f:
                f.write('#!/bin/bash\nif [ "$1" = -c ] && [[ "$2" == *cuda.is_available* ]]; then exit 0; fi\n'
                        f'exec "{sys.executable}" "$@"\n')
            os.chmod(py, 0o755)
            out = os.path.join(tmp, "gpu-check.json")
            e = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_"))}
            p = subprocess.Popen(["bash", SCRIPT, "--no-build", "--build", build, "--python", py, "--out", out,
                                  "--only", "bench_dnabert_kernels,bench_logo_kernels"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e)
            log = []
            for line in p.stdout:
                log.append(line)
                if line.strip() == "== bench_dnabert_kernels":
                    break
            time.sleep(1)
            p.send_signal(signal.SIGTERM)
            log.append(p.stdout.read())
            p.stdout.close()
            rc = p.wait(timeout=60)
            log = "".join(log)
            self.assertEqual(rc, 143, log)
            with open(out) as f:
                res = json.load(f)
            self.assertEqual(res["parts"]["bench_dnabert_kernels"]["note"], "interrupted by SIGTERM (stopped)", log)
            self.assertNotIn("bench_logo_kernels", res["parts"])
            self.assertEqual(res["kernels"], {})
            self.assertNotEqual(subprocess.run(["pgrep", "-f", bench], capture_output=True).returncode, 0, log)

    def test_missing_python_modules_are_named_before_building(self):
        with tempfile.TemporaryDirectory() as tmp:
            stubs = os.path.join(tmp, "stubs")
            os.makedirs(stubs)
            for m in ("numpy", "h5py"):
                with open(os.path.join(stubs, m + ".py"), "w") as f:
                    f.write(f"raise ModuleNotFoundError(\"No module named '{m}'\", name='{m}')\n")
            py = os.path.join(tmp, "python")
            with open(py, "w") as f:
                f.write(f'#!/bin/sh\nPYTHONPATH={stubs} exec "{sys.executable}" "$@"\n')
            os.chmod(py, 0o755)
            out = os.path.join(tmp, "gpu-check.json")
            p = gpu_check(out, build=os.path.join(tmp, "no-build"), python=py)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertFalse(os.path.exists(out))
        lines = [l for l in p.stderr.splitlines() if "cannot import" in l]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("cannot import: numpy, h5py (needed: torch numpy h5py)", lines[0])
        self.assertNotIn("==", p.stdout)  # no part ran

    def test_pretrain_on_real_shards(self):
        # --genome: `genemask pretrain` of the logo model on real shards of a 300 kb genome (as
        # bench/paper_scale.sh runs it), 2 steps of 2 samples, beside the synthetic eager step
        # at the same batch: its real tokens/s and model TFLOP/s from the run's summary, and
        # the ratio to the synthetic step's TFLOP/s; no MFU on a CPU.
        import random
        with tempfile.TemporaryDirectory() as tmp:
            genome = os.path.join(tmp, "g.fa")
            rng = random.Random(7)
            with open(genome, "w") as f:
                for r in range(3):
                    s = "".join(rng.choice("ACGT") for _ in range(100000))
                    f.write(f">chr{r + 1}\n" + "".join(s[i:i + 80] + "\n" for i in range(0, len(s), 80)))
            out = os.path.join(tmp, "gpu-check.json")
            p = gpu_check(out, "--steps", "1", "--genome", genome, "--pretrain-steps", "2",
                          "--only", "bench_logo_genemask,pretrain_logo")
            log = p.stdout + p.stderr
            self.assertEqual(p.returncode, 0, log)
            with open(out) as f:
                res = json.load(f)
            # The counts, shards and run were made in its own work folder, and removed with it.
            self.assertEqual(sorted(os.listdir(tmp)), ["g.fa", "gpu-check.json"])
        self.assertEqual(res["parts"]["pretrain_logo"]["status"], "passed", log)
        self.assertEqual(res["parts"]["pretrain_dnabert"], {"status": "skipped", "exit_code": None, "seconds": 0,
                                                            "note": "not asked for: --only"})
        self.assertEqual(list(res["pretrain"]), ["logo"])
        pr = res["pretrain"]["logo"]
        self.assertEqual((pr["batch"], pr["steps"]), (2, 2))
        self.assertGreater(pr["real_tokens_per_s"], 0)
        self.assertGreater(pr["model_tflops"], 0)
        self.assertIsNone(pr["mfu"])  # no peak on a CPU
        self.assertIsNone(pr["mfu_datasheet"])
        self.assertTrue(pr["loss"] > 0, pr)
        self.assertTrue(0 < pr["fill"] <= 1, pr)  # packed: real tokens over the positions computed
        self.assertGreaterEqual(pr["rows_per_micro_batch"], 1)
        self.assertTrue(0 <= pr["input_wait"] <= 1 and pr["loader_busy"] >= 0, pr)  # shares of the window
        syn = [r for r in res["runs"] if r["impl"] == "genemask" and r["config"] == "logo"]
        self.assertEqual(len(syn), 1)
        self.assertEqual(syn[0]["batch"], 2)
        self.assertEqual(pr["synthetic"], {"variant": "eager", "achieved_tflops": syn[0]["achieved_tflops"], "mfu": None})
        self.assertAlmostEqual(pr["vs_synthetic"], pr["model_tflops"] / syn[0]["achieved_tflops"], places=9)
        self.assertEqual((pr["packing"], pr["cuda_graphs"]), ("on", "off (the device is a CPU)"))
        self.assertEqual((pr["fixed_shapes"], pr["shape_setup_steps"]), (0, 0))  # no graphs' shapes
        # The packed rows' attention on a CPU, or none where no batch of 2 packed into fewer
        # positions (the trainer keeps such a batch padded).
        self.assertIn(pr["packed_attention"], ([], ["cpu-segments"]))
        self.assertRegex(p.stdout, r"(?m)^logo     pretrain on real shards \(random masking, batch 2, 2 steps, "
                                   r"packing on, CUDA graphs off \(the device is a CPU\)\): \d+ real tokens/s "
                                   r"\(fill [0-9.]+, [0-9.]+ rows a micro-batch; waited for its input [0-9.]+% of the "
                                   r"time, loader busy [0-9.]+%\), "
                                   r"[0-9.]+ model TFLOP/s, MFU - \(datasheet -\); "
                                   r"the synthetic eager step: [0-9.]+ TFLOP/s, pretrain / synthetic [0-9.]+x; "
                                   r"at its rows \(eager, batch \d+\): [0-9.]+ TFLOP/s, [0-9.]+x$")
        # The synthetic step again at the rows the packed real step computed (rounded).
        same = pr["synthetic_same_rows"]
        self.assertEqual(same["batch"], max(1, round(pr["rows_per_micro_batch"])), pr)
        self.assertEqual(same["variant"], "eager")
        self.assertAlmostEqual(pr["vs_synthetic_same_rows"], pr["model_tflops"] / same["achieved_tflops"], places=9)
        # The real step's profile (pretrain --profile-steps: of a 2-step run, the one step before
        # the last), in the JSON and in the table of where a step's time goes.
        prof = pr["profile"]
        self.assertEqual(prof["steps"], 1, prof)
        self.assertEqual(sorted(prof["seconds_per_step"]),
                         sorted(["matmul", "attention", "elementwise_norm", "optimizer", "copies_casts", "idle"]))
        self.assertGreater(prof["seconds_per_step"]["matmul"], 0)
        self.assertGreater(prof["step_s"], 0)
        # Six classes and the step in ms, then the host's waits for a GPU: none counted on a CPU.
        self.assertIsNone(prof["host_syncs_per_step"])
        self.assertRegex(p.stdout, r"(?m)^logo +pretrain +2 +([0-9.]+ +){7}-$")

    def test_bad_counts_are_refused_before_any_part(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "gpu-check.json")
            for args, want in [(["--sweep-logo", "64 x"], "--sweep-logo takes positive integers, got 'x'"),
                               (["--steps", "0"], "--steps takes positive integers, got '0'"),
                               (["--batch-dnabert", "3.5"], "--batch-dnabert takes positive integers, got '3.5'"),
                               (["--sweep-dnabert", ""], "--sweep-dnabert needs at least one positive integer"),
                               (["--pretrain-steps", "-1"], "--pretrain-steps takes positive integers, got '-1'"),
                               (["--genome", os.path.join(tmp, "none.fa")],
                                f"--genome: '{os.path.join(tmp, 'none.fa')}' is not a readable file")]:
                p = gpu_check(out, *args)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertEqual(p.stderr.strip(), "gpu-check.sh: " + want)
                self.assertNotIn("==", p.stdout)  # no part ran
                self.assertFalse(os.path.exists(out))

    def test_out_that_is_an_input_or_cannot_be_written_is_refused_before_any_part(self):
        # --out names the JSON the script writes at the end: the genome it reads (by any
        # path to the same file), a folder, or a file in a missing folder is refused at the
        # start, and the genome's bytes are left as they were.
        import hashlib
        with tempfile.TemporaryDirectory() as tmp:
            genome = os.path.join(tmp, "g.fa")
            with open(genome, "w") as f:
                f.write(">chr1\n" + "ACGT" * 50 + "\n")
            os.symlink(genome, os.path.join(tmp, "link.fa"))
            digest = lambda: hashlib.sha256(open(genome, "rb").read()).hexdigest()
            before = digest()
            same = "gpu-check.sh: --out '{}' is the genome (--genome); name another file for the JSON"
            for out, want in [(genome, same.format(genome)),
                              (os.path.join(tmp, ".", "g.fa"), same.format(os.path.join(tmp, ".", "g.fa"))),
                              (os.path.join(tmp, "link.fa"), same.format(os.path.join(tmp, "link.fa"))),
                              (tmp, f"gpu-check.sh: --out '{tmp}' is a folder; name a file for the JSON, "
                                    f"e.g. {tmp}/gpu-check.json"),
                              (os.path.join(tmp, "no", "r.json"),
                               f"gpu-check.sh: --out '{os.path.join(tmp, 'no', 'r.json')}': its folder does not "
                               "exist or cannot be written; make it first")]:
                p = gpu_check(out, "--genome", genome, "--only", "model_tests")
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertEqual(p.stderr.strip(), want)
                self.assertNotIn("==", p.stdout)  # no part ran
                self.assertEqual(digest(), before)
            self.assertEqual(sorted(os.listdir(tmp)), ["g.fa", "link.fa"])

    def test_only_runs_the_parts_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "gpu-check.json")
            asked = ["model_tests", "bench_logo_genemask"]
            p = gpu_check(out, "--steps", "1", "--only", ",".join(asked))
            log = p.stdout + p.stderr
            self.assertEqual(p.returncode, 0, log)
            with open(out) as f:
                res = json.load(f)
            parts = res["parts"]
            self.assertEqual(list(parts), PARTS)
            for name in PARTS[1:]:
                if name in asked:
                    self.assertEqual(parts[name]["status"], "passed", log)
                else:
                    self.assertEqual(parts[name]["status"], "skipped", name)
                    self.assertEqual(parts[name]["note"], SKIPPED.get(name, "not asked for: --only"), name)
            self.assertEqual([(r["impl"], r["config"]) for r in res["runs"]], [("genemask", "logo")])
            self.assertTrue(res["passed"])
            self.assertEqual(os.listdir(tmp), ["gpu-check.json"])  # written whole, no temporary left
            # Every part can be asked for by name (the GPU-only ones are skipped here, with
            # their reason, not refused as unknown).
            p = gpu_check(out, "--only", ",".join(SKIPPED))
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(out) as f:
                parts = json.load(f)["parts"]
            for name in SKIPPED:
                self.assertEqual((name, parts[name]["status"], parts[name]["note"]), (name, "skipped", SKIPPED[name]))
            # A name that is no part: one line naming it and the parts, before any part ran.
            for bad in ["bench_logo_gelu", "model_tests,,gpu_tests", ",", ""]:
                p = gpu_check(os.path.join(tmp, "bad.json"), "--only", bad)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                self.assertRegex(p.stderr, r"^gpu-check.sh: --only(: no part named '[a-z_]*' \(the parts: build, "
                                           r"model_tests, gpu_tests, bench_dnabert_genemask, .*\)| needs at least one part name)")
                self.assertNotIn("==", p.stdout)
                self.assertFalse(os.path.exists(os.path.join(tmp, "bad.json")))

    def test_model_tests_filter_covers_every_gpu_body(self):
        # Every C++ model test that does something on a GPU where one is visible is in the
        # model_tests part's filter: a GPU session runs its assertions there, or nowhere.
        import fnmatch
        with open(SCRIPT) as f:
            patterns = re.search(r"--gtest_filter='([^']*)'", f.read()).group(1).split(":")
        gpu_tests = []
        model_dir = os.path.join(ROOT, "tests", "model")
        for name in sorted(os.listdir(model_dir)):
            if not name.endswith(".cpp"):
                continue
            with open(os.path.join(model_dir, name)) as f:
                src = f.read()
            heads = list(re.finditer(r"^TEST(?:_F)?\((\w+),\s*(\w+)\)", src, re.M))
            for i, m in enumerate(heads):
                body = src[m.start():heads[i + 1].start() if i + 1 < len(heads) else len(src)]
                if "cuda::is_available" in body or "kCUDA" in body:
                    gpu_tests.append(f"{m.group(1)}.{m.group(2)}")
        self.assertGreaterEqual(len(gpu_tests), 15)
        missing = [t for t in gpu_tests if not any(fnmatch.fnmatchcase(t, p) for p in patterns)]
        self.assertEqual(missing, [])

    def test_module_list_covers_the_imports(self):
        with open(SCRIPT) as f:
            listed = set(re.search(r"(?m)^modules=\((.*)\)$", f.read()).group(1).split())
        needed = set()
        local = {"test_cli", "test_corpus"}
        for rel in ["tests/cli/test_gpu.py", "tests/cli/test_cli.py", "tests/cli/test_corpus.py",
                    "bench/train_bench.py"]:
            with open(os.path.join(ROOT, rel)) as f:
                tree = ast.parse(f.read())
            # Module level for all; inside functions too for the GPU tests (h5py).
            nodes = ast.walk(tree) if rel.endswith("test_gpu.py") else tree.body
            for n in nodes:
                names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                    [n.module] if isinstance(n, ast.ImportFrom) and n.module and not n.level else []
                needed |= {x.split(".")[0] for x in names}
        needed -= set(sys.stdlib_module_names) | local
        self.assertTrue({"torch", "numpy", "h5py"} <= needed, needed)
        self.assertEqual(needed - listed, set())

    def test_gpu_tests_never_skip_as_a_whole(self):
        with open(os.path.join(ROOT, "tests", "cli", "test_gpu.py")) as f:
            src = f.read()
        tree = ast.parse(src)
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                f = n.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                # sys.exit(77), os._exit, exit(): no exit path; skipTest, skip*: no skipping.
                self.assertNotIn(name, {"exit", "_exit", "quit", "skipTest", "skip", "skipIf", "skipUnless"},
                                 ast.get_source_segment(src, n))
            if isinstance(n, ast.Raise) and n.exc is not None:
                self.assertNotIn("SkipTest", ast.get_source_segment(src, n.exc))
            if isinstance(n, ast.Constant):
                self.assertNotEqual(n.value, 77, "an exit code 77 (ctest's skip) in test_gpu.py")
        # Every test goes through each_device (a subTest per device: cpu always, cuda where visible).
        tests = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
        self.assertGreaterEqual(len(tests), 8)
        for t in tests:
            self.assertIn("self.each_device(", ast.get_source_segment(src, t), t.name)


class TrainBenchFusions(unittest.TestCase):
    """train_bench's fusion flags, which gpu-check.sh's ablation parts pass on a GPU: the JSON
    line says which fusions the step ran with (those in force on its device: on a CPU the
    LayerNorm and GELU kernels are LibTorch's, and the bf16 copy is made under bf16), the
    defaults (src/model/fusions.hpp) without flags; each flag changes its own and no other."""

    def run_bench(self, *flags, fused=None):
        env = dict(os.environ)
        env.pop("GENEMASK_FUSED", None)
        if fused is not None:
            env["GENEMASK_FUSED"] = fused
        p = subprocess.run([os.path.join(BUILD, "bench", "train_bench"), "logo", "1", "2", "32", "1", "cpu", "bf16",
                            *flags], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
        self.assertEqual(r["bgrad_products"],
                         {"fused": 0, "fused_bf16": 0, "fallback": 0, "column_sums": 0, "stacked": 0})
        self.assertIsNone(r["gelu_rows_in_flight"])  # the fused GELU runs on a GPU only
        return {k: r[k] for k in ("fused_qkv", "fused_ln", "ln_bf16", "fused_gelu", "bgrad", "ln_smem", "ln_lean", "bias_sum",
                                  "fused_ce", "ce_pad", "cudnn_varlen", "gemm_gelu", "weight_bf16")}

    def test_flags(self):
        default = {"fused_qkv": True, "fused_ln": False, "ln_bf16": True, "fused_gelu": False, "bgrad": False,
                   "ln_smem": False, "ln_lean": False, "bias_sum": False, "fused_ce": False, "ce_pad": False,
                   "cudnn_varlen": False, "gemm_gelu": False, "weight_bf16": True}
        self.assertEqual(self.run_bench(), default)
        self.assertEqual(self.run_bench("--no-ln-bf16"), dict(default, ln_bf16=False))
        self.assertEqual(self.run_bench("--ln-bf16"), default)
        # The fused bias + GELU is a GPU kernel: in force on a GPU only, asked for or not.
        self.assertEqual(self.run_bench("--fused-gelu"), default)
        self.assertEqual(self.run_bench("--no-fused-gelu"), default)
        # So is the bias gradient in cuBLASLt's epilogue.
        self.assertEqual(self.run_bench("--bgrad"), default)
        self.assertEqual(self.run_bench("--no-bgrad"), default)
        # And the fused LayerNorm's shared-memory sums (its kernel runs on a GPU only).
        self.assertEqual(self.run_bench("--ln-smem"), default)
        self.assertEqual(self.run_bench("--no-ln-smem"), default)
        # And the lean LayerNorm (its kernels run on a GPU only).
        self.assertEqual(self.run_bench("--ln-lean"), default)
        self.assertEqual(self.run_bench("--no-ln-lean"), default)
        # And the column-sum kernel for the bias gradients.
        self.assertEqual(self.run_bench("--bias-sum"), default)
        self.assertEqual(self.run_bench("--no-bias-sum"), default)
        # And the fused cross-entropy.
        self.assertEqual(self.run_bench("--fused-ce"), default)
        self.assertEqual(self.run_bench("--no-fused-ce"), default)
        # And the decoder's padded classes.
        self.assertEqual(self.run_bench("--ce-pad"), default)
        self.assertEqual(self.run_bench("--no-ce-pad"), default)
        # And the feed-forward's fused products (a Hopper GPU's, under bf16).
        self.assertEqual(self.run_bench("--gemm-gelu"), default)
        self.assertEqual(self.run_bench("--no-gemm-gelu"), default)
        # The weights' bf16 copies: kept under bf16 on any device.
        self.assertEqual(self.run_bench("--no-weight-bf16"), dict(default, weight_bf16=False))
        self.assertEqual(self.run_bench("--weight-bf16"), default)
        self.assertEqual(self.run_bench("--unfused-qkv", "--no-ln-bf16"), dict(default, fused_qkv=False, ln_bf16=False))
        # And cuDNN's attention over ragged segments (a GPU's, with --packing).
        self.assertEqual(self.run_bench("--cudnn-varlen", "--packing", "--lengths", "uniform"), default)
        # GENEMASK_FUSED, where set, gives the flags' defaults (the way a GPU check measures the
        # packed step and `pretrain` with the same fusions); the flags still change them.
        self.assertEqual(self.run_bench(fused="qkv"), dict(default, ln_bf16=False, weight_bf16=False))
        self.assertEqual(self.run_bench("--weight-bf16", fused="qkv"), dict(default, ln_bf16=False))
        p = subprocess.run([os.path.join(BUILD, "bench", "train_bench"), "logo", "1", "2", "32", "1"],
                           capture_output=True, text=True, env=dict(os.environ, GENEMASK_FUSED="qkv,fast"))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("GENEMASK_FUSED='qkv,fast'", p.stderr)
        p = subprocess.run([os.path.join(BUILD, "bench", "train_bench"), "logo", "1", "2", "32", "1", "--ln-bf17"],
                           capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stderr.strip()), (2, "train_bench: unknown option '--ln-bf17'"))
        # The fused GELU's rows in flight: taken (1, 2, 4), another count refused before any step.
        self.assertEqual(self.run_bench("--gelu-rows", "4"), default)
        p = subprocess.run([os.path.join(BUILD, "bench", "train_bench"), "logo", "1", "2", "32", "1", "--gelu-rows", "3"],
                           capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stdout, p.stderr.strip()),
                         (2, "", "train_bench: error: the fused bias + GELU's rows in flight: 3; the kernels take 1, 2 or 4"))


def report_code():
    """The report's Python, as gpu-check.sh runs it (report(): `"$python" - WORK OUT DEVICE
    PEAK INTERRUPTED VARIANTS`)."""
    with open(SCRIPT) as f:
        text = f.read()
    m = re.search(r"\nreport\(\) \{\n[^\n]*<<'PY'\n(.*?)\nPY\n\}", text, re.S)
    assert m, "gpu-check.sh: report() not found"
    return m.group(1)


class Report(unittest.TestCase):
    """What the report makes of the parts' outputs, and options it needs checked before any
    part runs."""

    def fake_build(self, tmp):
        """A build directory whose model_tests only leaves a mark that it ran."""
        build = os.path.join(tmp, "build")
        os.makedirs(os.path.join(build, "tests"))
        with open(os.path.join(build, "tests", "model_tests"), "w") as f:
            f.write(f"#!/bin/sh\ntouch {tmp}/ran\nexit 0\n")
        os.chmod(os.path.join(build, "tests", "model_tests"), 0o755)
        return build

    def test_peak_tflops_checked_before_any_part(self):
        for v in ("-5", "nan", "inf", "abc", "0", "0.0", "1e999", "", "5e", "1 2"):
            with self.subTest(peak=v), tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "gpu-check.json")
                p = gpu_check(out, "--only", "model_tests", "--peak-tflops", v, build=self.fake_build(tmp))
                self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
                self.assertEqual(p.stderr.strip(), "gpu-check.sh: --peak-tflops takes a number above 0 "
                                                   f"(the bf16 peak in TFLOP/s), got '{v}'")
                self.assertFalse(os.path.exists(os.path.join(tmp, "ran")))
                self.assertFalse(os.path.exists(out))
        for v, want in (("989", 989.0), ("1e3", 1000.0), (".5", 0.5)):
            with self.subTest(peak=v), tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "gpu-check.json")
                p = gpu_check(out, "--only", "model_tests", "--peak-tflops", v, build=self.fake_build(tmp))
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                with open(out) as f:
                    res = json.load(f)
                self.assertEqual((res["peak_tflops"], res["peak_how"]), (want, "given (--peak-tflops)"))

    def test_a_report_that_crashes_says_so(self):
        # Every part passed, then the report's Python fails: not "a part failed".
        with tempfile.TemporaryDirectory() as tmp:
            python = os.path.join(tmp, "python")
            with open(python, "w") as f:
                f.write('#!/bin/sh\nif [ "$1" = - ] && [ $# = 7 ]; then cat >/dev/null; '
                        'echo "Traceback (most recent call last): ValueError" >&2; exit 1; fi\n'
                        f'exec "{sys.executable}" "$@"\n')
            os.chmod(python, 0o755)
            out = os.path.join(tmp, "gpu-check.json")
            p = gpu_check(out, "--only", "model_tests", build=self.fake_build(tmp), python=python)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("gpu-check.sh: the report failed (exit code 1)", p.stderr)

    def test_a_graph_row_that_fails_its_check_is_in_no_figure(self):
        eager = {"impl": "genemask", "config": "logo", "batch": 64, "seq": 512, "median_tokens_per_s": 100000,
                 "median_step_s": 0.3, "achieved_tflops": 300, "peak_memory_gib": 10, "measured_peak_tflops": 750,
                 "graph_check": None, "cuda_graph": False, "profile": None}
        graph = dict(eager, median_tokens_per_s=250000, median_step_s=0.13, achieved_tflops=700, cuda_graph=True,
                     graph_check={"eager": [8.3], "graph": [4.1], "max_rel_diff": 0.5})
        good = dict(graph, batch=128, median_tokens_per_s=200000,
                    graph_check={"eager": [8.3], "graph": [8.3], "max_rel_diff": 1e-5})
        torch_row = {"impl": "pytorch", "config": "logo", "batch": 64, "seq": 512, "median_tokens_per_s": 90000,
                     "median_step_s": 0.35, "peak_memory_gib": 12}
        with tempfile.TemporaryDirectory() as work:
            for name, row in (("genemask", eager), ("graph", graph), ("pytorch", torch_row)):
                with open(os.path.join(work, f"bench-logo-{name}.json"), "w") as f:
                    f.write(json.dumps(row) + "\n")
            with open(os.path.join(work, "bench-logo-sweep.jsonl"), "w") as f:  # a sweep row that fails too
                f.write(json.dumps(good) + "\n" + json.dumps(dict(graph, batch=256)) + "\n")
            with open(os.path.join(work, "parts.tsv"), "w") as f:
                for part in ("bench_logo_genemask", "bench_logo_graph", "bench_logo_pytorch", "bench_logo_sweep"):
                    f.write(f"{part}\tpassed\t0\t1000\t\n")
            out = os.path.join(work, "out.json")
            p = subprocess.run([sys.executable, "-", work, out, "cpu", "1000", "", "genemask graph"],
                               input=report_code(), capture_output=True, text=True)
            log = p.stdout + p.stderr
            self.assertEqual(p.returncode, 3, log)  # a part failed
            with open(out) as f:
                res = json.load(f)
        self.assertEqual(sorted((r["variant"], r["batch"]) for r in res["runs"] if r["impl"] == "genemask"),
                         [("eager", 64), ("graph", 128)], log)
        self.assertEqual((res["best"]["logo"]["variant"], res["best"]["logo"]["tokens_per_s"]), ("graph", 200000))
        self.assertAlmostEqual(res["best"]["logo"]["ratio_vs_pytorch_best"], 200000 / 90000)
        self.assertEqual([(r["variant"], r["batch"], r["rejected"]) for r in res["rejected"]],
                         [("graph", 64, "graph losses differ from the eager step's by 0.5 (> 2e-3)"),
                          ("graph", 256, "graph losses differ from the eager step's by 0.5 (> 2e-3)")])
        for part in ("bench_logo_graph", "bench_logo_sweep"):
            self.assertEqual(res["parts"][part]["status"], "failed")
        self.assertFalse(res["passed"])
        self.assertIn("logo     genemask  graph         64 REJECTED, in no figure: graph losses differ", p.stdout)
        self.assertNotIn("250000", p.stdout)


class BenchArguments(unittest.TestCase):
    """The small benchmarks' arguments: a bad one is one line and exit 2 before anything is
    timed (no crash, no figure for work never done, no precision run under another name)."""

    def run_bench(self, name, *args, mpi=False):
        cmd = [os.path.join(BUILD, "bench", name), *args]
        if mpi:
            cmd = ["mpiexec", "-n", "2", "--oversubscribe", *cmd]
        e = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        return subprocess.run(cmd, capture_output=True, text=True, env=e)

    def test_train_bench(self):
        for args, msg in [(["16", "0"], "STEPS must be a positive integer, got '0'"),
                          (["16", "-3"], "STEPS must be a positive integer, got '-3'"),
                          (["0", "1"], "SEQ must be a positive integer, got '0'"),
                          (["16", "1", "cpu", "fp16"], "PRECISION must be fp32 or bf16, got 'fp16'"),
                          (["16", "1", "cpu", "bf61"], "PRECISION must be fp32 or bf16, got 'bf61'")]:
            p = self.run_bench("train_bench", "logo", "1", "1", *args)
            self.assertEqual((p.returncode, p.stdout, p.stderr.strip()), (2, "", f"train_bench: error: {msg}"), args)
        p = self.run_bench("train_bench", "logo", "1", "0", "16", "1")
        self.assertEqual((p.returncode, p.stderr.strip()), (2, "train_bench: error: BATCH must be a positive integer, got '0'"))
        p = self.run_bench("train_bench", "logo", "1", "1", "16", "1", "cpu", "fp32")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertIsNone(r["peak_memory_gib"])  # no GPU allocator on a CPU: not measured
        self.assertEqual(r["precision"], "fp32")
        # Its Python twin likewise.
        p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "train_bench.py"), "logo", "1", "1", "16", "1",
                            "cpu", "fp16"], capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stdout, p.stderr.strip()),
                         (2, "", "train_bench.py: PRECISION must be fp32 or bf16, got 'fp16'"))

    def test_mask_bench(self):
        with tempfile.TemporaryDirectory() as tmp:
            tok = os.path.join(tmp, "tok.bin")
            for n, msg in [("19", "SEQUENCES must be a multiple of 10 (the batch), got '19'"),
                           ("5", "SEQUENCES must be a multiple of 10 (the batch), got '5'"),
                           ("0", "SEQUENCES must be a positive integer, got '0'"),
                           ("abc", "SEQUENCES must be an integer, got 'abc'")]:
                p = self.run_bench("mask_bench", tok, n)
                self.assertEqual((p.returncode, p.stdout, p.stderr.strip()), (2, "", f"mask_bench: error: {msg}"), n)
            p = self.run_bench("mask_bench", tok, "20")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual({json.loads(l)["sequences"] for l in p.stdout.splitlines()}, {20})

    def test_allreduce_bench(self):
        for args, msg in [(["1000", "0"], "ITERS must be a positive integer, got '0'"),
                          (["abc", "5"], "FLOATS must be an integer, got 'abc'"),
                          (["0"], "FLOATS must be a positive integer, got '0'")]:
            p = self.run_bench("allreduce_bench", *args)
            self.assertEqual((p.returncode, p.stdout, p.stderr.strip()), (2, "", f"allreduce_bench: error: {msg}"), args)
        p = self.run_bench("allreduce_bench", "1000", "x", mpi=True)  # one line, from rank 0
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(p.stderr.count("allreduce_bench: error: ITERS must be an integer, got 'x'"), 1, p.stderr)
        p = self.run_bench("allreduce_bench", "1000", "3")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["floats"], 1000)


class KernelBenchOnTheCpu(unittest.TestCase):
    """bench/kernel_bench (gpu-check.sh's bench_CFG_kernels) where no GPU is visible: --help,
    its arguments checked before anything else, and without a GPU one line and exit 2, never
    a result."""

    def run_kernel_bench(self, *args):
        e = dict(os.environ, CUDA_VISIBLE_DEVICES="")
        return subprocess.run([os.path.join(BUILD, "bench", "kernel_bench"), *args], capture_output=True, text=True,
                              env=e)

    def test_help_and_arguments(self):
        # Built with a CUDA LibTorch only (it calls the kernels' launchers); CI's is one.
        if os.environ.get("GENEMASK_TORCH_CUDA", "ON") != "ON":
            self.skipTest("kernel_bench is built with a CUDA LibTorch only")
        p = self.run_kernel_bench("--help")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Usage: kernel_bench [CONFIG [BATCH [SEQ]]] [--repeats N]", p.stdout)
        for args, msg in [(["--repeats", "0"], "--repeats must be a positive integer, got '0'"),
                          (["dnabert", "6x"], "BATCH must be an integer, got '6x'"),
                          (["--fast"], "unknown option '--fast' (see --help)"),
                          (["--repeats"], "--repeats needs a value (see --help)"),
                          (["dnabert", "1", "2", "3"], "at most CONFIG, BATCH and SEQ (see --help)")]:
            p = self.run_kernel_bench(*args)
            self.assertEqual((p.returncode, p.stdout, p.stderr.strip()), (2, "", f"kernel_bench: error: {msg}"), args)
        p = self.run_kernel_bench("nosuchconfig")
        self.assertEqual((p.returncode, p.stdout), (2, ""))
        self.assertIn("nosuchconfig", p.stderr)
        p = self.run_kernel_bench("logo", "2", "16")
        self.assertEqual((p.returncode, p.stdout, p.stderr.strip()),
                         (2, "", "kernel_bench: no GPU visible: the kernels it times run on a GPU"))

if __name__ == "__main__":
    unittest.main(verbosity=2)
