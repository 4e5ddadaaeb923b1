#!/usr/bin/env python3
"""scripts/gpu-check.sh as a dry run on the CPU (--cpu --no-build, one timed step): the
GPU tests report themselves skipped, both configs are benchmarked against Python PyTorch,
and the JSON holds what the table prints, with the model FLOPs per token of the closed
form in docs/build.md."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ["GENEMASK_BUILD_DIR"]
CONFIGS = {"dnabert": (768, 12, 3072), "logo": (256, 2, 3072)}


class GpuCheckDryRun(unittest.TestCase):
    def test_dry_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "gpu-check.json")
            p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu-check.sh"), "--cpu", "--no-build",
                                "--build", BUILD, "--steps", "1", "--python", sys.executable, "--out", out],
                               capture_output=True, text=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("genemask / PyTorch", p.stdout)
            with open(out) as f:
                res = json.load(f)
        self.assertEqual(res["gpu_tests"], "skipped")
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
            self.assertGreater(sum(r["breakdown_s"].values()), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
