#!/usr/bin/env python3
"""scripts/gpu-bundle.sh: a built genemask packed for a GPU node without compilers or the
libraries it links, and run from the pack by scripts/gpu-check.sh --no-build.
- The pack: the three programs and genemask's own libraries without debug information;
  bundle.json with this PyTorch's version and every package in deps/ at its installed
  version (dpkg-query), Open MPI's launcher among them (mpirun and mpiexec linked as
  update-alternatives would) and none of the node's own (libc6, libstdc++6, libgcc-s1),
  nor any CUDA library, also when the toolkit's runtime is reached through a link outside
  the toolkit (a folder on LD_LIBRARY_PATH linking it, as /usr/local/lib does on some
  machines).
- Whole: with only the pack's and PyTorch's libraries on the path, ldd (an independent
  resolver) finds every library each program and the training library load in the pack,
  in PyTorch, or in the C and C++ runtimes: none "not found", none from another package of
  this machine.
- Relocated: in a mount namespace where the packages a bare node lacks are hidden on this
  machine (Open MPI's and PMIx's plugin folders emptied, each file of Open MPI, PMIx,
  hwloc, libevent, HDF5, Boost, fmt, ISA-L and yaml-cpp replaced by an empty one),
  gpu-check.sh --cpu --no-build runs from the pack: the model checks, the GPU tests'
  bodies on the CPU with 2 ranks through the pack's launcher, and the benchmarks all pass.
  The pack's deps/ goes in as a plain `dpkg -x` tree (without mpirun's and mpiexec's
  links, which gpu-check.sh then finds as mpiexec.openmpi).
- Refusals: an existing DIR (exit 2, left as it was), a build without the programs (exit 1,
  no DIR and no temporary left), a folder already named as its temporary (exit 1, the
  folder and its file left as they were), a stray option, an option without its value (here and in
  gpu-check.sh: one line); DIR given with a trailing slash packs into DIR itself; and gpu-check.sh refuses a bundle built
  with another PyTorch version before any part runs (exit 2, naming both versions).
- --archive: one file DIR.tar.gz and nothing else (no DIR, no temporary); unpacked with the
  command it prints, it is the directory pack's tree file for file (contents, modes, links);
  an existing DIR.tar.gz is refused (exit 2, left as it was)."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLE = os.path.join(ROOT, "scripts", "gpu-bundle.sh")
CHECK = os.path.join(ROOT, "scripts", "gpu-check.sh")
BUILD = os.environ.get("GENEMASK_BUILD_DIR", os.path.join(ROOT, "build"))
PROGRAMS = ["src/cli/genemask", "bench/train_bench", "bench/kernel_bench", "tests/model_tests"]
NODE_OWN = {"libc6", "libstdc++6", "libgcc-s1"}
HIDDEN = ("libopenmpi", "openmpi-", "libpmix", "libhwloc", "libevent", "libhdf5", "libboost", "libfmt", "libisal",
          "libyaml-cpp")
TORCH_SITE = os.path.dirname(os.path.dirname(torch.__file__))


def bundle(out, *args, env=None):
    return subprocess.run(["bash", BUNDLE, out, "--build", BUILD, "--python", sys.executable, *args],
                          capture_output=True, text=True, env=env)


def tree(root):
    """Every file, link and folder under root: its kind, mode and contents or link target."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            path = os.path.join(d, n)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir", st.st_mode)
            else:
                with open(path, "rb") as f:
                    out[rel] = ("file", st.st_mode, hash(f.read()))
    return out


def cuda_runtime():
    """The CUDA runtime the training library loads, as ldd resolves it here (the toolkit's)."""
    out = subprocess.run(["ldd", os.path.join(BUILD, "src", "cli", "libgenemask_model.so")], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].startswith("libcudart.so") and parts[1] == "=>":
            return parts[0], parts[2]
    return None


def lib_dirs(deps):
    """The library folders gpu-check.sh puts on the path for --prefix deps (a dpkg -x tree)."""
    usr = os.path.join(deps, "usr")
    return [d for d in (os.path.join(usr, s) for s in ("lib", "lib64", "lib/x86_64-linux-gnu",
                                                       "lib/x86_64-linux-gnu/openmpi/lib")) if os.path.isdir(d)]


def owner(path):
    """The package that installed path, as dpkg recorded it (/lib or /usr/lib: merged /usr)."""
    real = os.path.realpath(path)
    for alt in (path, real, "/usr" + path, "/usr" + real, path.removeprefix("/usr"), real.removeprefix("/usr")):
        p = subprocess.run(["dpkg", "-S", alt], capture_output=True, text=True)
        if p.returncode == 0:
            return p.stdout.split(":")[0]
    return None


class GpuBundle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.dir = os.path.join(cls.tmp, "bundle")
        # The CUDA runtime reached through a link outside the toolkit, as on machines whose
        # /usr/local/lib links the toolkit's libcudart: the pack still leaves it to the node.
        env = None
        cls.cudart = cuda_runtime()
        if cls.cudart:
            links = os.path.join(cls.tmp, "links")
            os.mkdir(links)
            os.symlink(os.path.realpath(cls.cudart[1]), os.path.join(links, cls.cudart[0]))
            env = dict(os.environ, LD_LIBRARY_PATH=links)
        cls.made = bundle(cls.dir, env=env)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def setUp(self):
        self.assertEqual(self.made.returncode, 0, self.made.stdout + self.made.stderr)

    def test_the_pack(self):
        self.assertIn(f"scripts/gpu-check.sh --no-build --build {self.dir}/build --prefix {self.dir}/deps",
                      self.made.stdout)
        own = os.listdir(os.path.join(self.dir, "build", "lib"))
        self.assertIn("libgenemask_model.so", own)
        for p in PROGRAMS + [os.path.join("lib", l) for l in own]:
            packed = os.path.join(self.dir, "build", p)
            self.assertTrue(os.access(packed, os.X_OK if p in PROGRAMS else os.R_OK), p)
            sections = subprocess.run(["readelf", "-S", "-W", packed], capture_output=True, text=True,
                                      check=True).stdout
            self.assertNotIn(".debug_info", sections, p)
            self.assertIn(".text", sections, p)
        with open(os.path.join(self.dir, "build", "bundle.json")) as f:
            meta = json.load(f)
        self.assertEqual((meta["torch"], meta["cuda"]), (torch.__version__, torch.version.cuda))
        pkgs = meta["packages"]
        self.assertTrue({"libopenmpi3", "openmpi-bin", "openmpi-common"} <= set(pkgs), sorted(pkgs))
        self.assertFalse(NODE_OWN & set(pkgs))
        for name, version in pkgs.items():
            want = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True,
                                  check=True).stdout
            self.assertEqual(version, want, name)
        # mpirun and Open MPI's plugins are in the pack.
        usr = os.path.join(self.dir, "deps", "usr")
        for n in ("mpirun", "mpiexec"):  # as update-alternatives links them
            self.assertEqual(os.readlink(os.path.join(usr, "bin", n)), n + ".openmpi")
            self.assertTrue(os.access(os.path.join(usr, "bin", n), os.X_OK), n)
        self.assertTrue(os.listdir(os.path.join(usr, "lib", "x86_64-linux-gnu", "openmpi", "lib", "openmpi3")))
        self.assertFalse(os.path.exists(os.path.join(usr, "share", "doc")))
        # No CUDA library in it: the node's PyTorch brings them (its nvidia-* wheels).
        packed = [f for _, _, fs in os.walk(self.dir) for f in fs]
        self.assertFalse([f for f in packed if f.startswith(("libcudart", "libcublas", "libnccl", "libcudnn"))])
        if torch.version.cuda:  # a CUDA build: its kernels link the runtime
            self.assertIsNotNone(self.cudart)

    def test_whole(self):
        # The path gpu-check.sh sets for the pack: its own libraries, PyTorch's and its nvidia-*
        # wheels' (the CUDA runtime among them), then --prefix's.
        wheels = sorted(glob.glob(os.path.join(TORCH_SITE, "nvidia", "*", "lib")))
        env = dict(os.environ, LD_LIBRARY_PATH=":".join(lib_dirs(os.path.join(self.dir, "deps"))
                                                         + [os.path.join(self.dir, "build", "lib"),
                                                            os.path.join(TORCH_SITE, "torch", "lib")] + wheels))
        for p in PROGRAMS + ["lib/libgenemask_model.so"]:
            out = subprocess.run(["ldd", os.path.join(self.dir, "build", p)], capture_output=True, text=True,
                                 env=env, check=True).stdout
            self.assertNotIn("not found", out, p)
            for line in out.splitlines():
                parts = line.split()
                if len(parts) < 3 or parts[1] != "=>":
                    continue
                lib = parts[2]
                if torch.version.cuda and parts[0].startswith("libcudart"):  # the wheels' runtime
                    self.assertTrue(lib.startswith(TORCH_SITE + "/"), f"{p} loads {lib}")
                if lib.startswith((self.dir + "/", TORCH_SITE + "/", "/usr/local/cuda")):
                    continue
                self.assertIn(owner(lib), NODE_OWN, f"{p} loads {lib} from outside the pack")

    def test_relocated_run(self):
        # The files of the packages a bare GPU node lacks hidden (Open MPI and what it loads,
        # HDF5, Boost, fmt, ISA-L, yaml-cpp; the common ones such as zlib stay, since Python
        # itself needs them here): folders of plugins emptied (tmpfs), libraries and programs
        # replaced by an empty file (a bind of /dev/null).
        with open(os.path.join(self.dir, "build", "bundle.json")) as f:
            pkgs = [n for n in json.load(f)["packages"] if n.startswith(HIDDEN)]
        self.assertTrue({"libopenmpi3", "openmpi-bin", "libpmix2", "libhwloc15"} <= set(pkgs), pkgs)
        self.assertTrue(any(n.startswith("libhdf5") for n in pkgs), pkgs)
        hide_dirs = [d for d in ("/usr/lib/x86_64-linux-gnu/openmpi", "/usr/lib/x86_64-linux-gnu/pmix2",
                                 "/usr/share/openmpi", "/usr/share/pmix", "/etc/openmpi") if os.path.isdir(d)]
        hide_files = []
        for name in pkgs:
            for f in subprocess.run(["dpkg", "-L", name], capture_output=True, text=True, check=True).stdout.split():
                if os.path.isfile(f) and not os.path.islink(f) and not f.startswith(tuple(d + "/" for d in hide_dirs)) \
                        and not f.startswith("/usr/share/"):
                    hide_files.append(f)
        self.assertIn("/usr/bin/orterun", hide_files)  # mpirun's target: the pack's must be used
        script = os.path.join(self.tmp, "hide.sh")
        out = os.path.join(self.tmp, "gpu-check.json")
        with open(script, "w") as f:
            f.write("set -e\n")
            for d in hide_dirs:
                f.write(f"mount -t tmpfs tmpfs {d}\n")
            for h in hide_files:
                f.write(f"mount --bind /dev/null {h}\n")
            f.write("test ! -s /usr/bin/orterun\n")  # hidden
            f.write('exec "$@"\n')
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "PMI_", "PMIX_", "OMPI_", "OPAL_", "MPIEXEC"))}
        env.update(CUDA_VISIBLE_DEVICES="")
        # The packages as a plain `dpkg -x` tree: without the launchers' plain names, which
        # gpu-check.sh then finds as mpiexec.openmpi itself.
        deps = os.path.join(self.tmp, "dpkg-x")
        shutil.copytree(os.path.join(self.dir, "deps"), deps, symlinks=True)
        for n in ("mpirun", "mpiexec"):
            os.remove(os.path.join(deps, "usr", "bin", n))
        # As root a mount namespace; otherwise one inside a user namespace, where root is mapped.
        unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
        p = subprocess.run([*unshare, "bash", script, "bash", CHECK, "--cpu", "--no-build",
                            "--build", os.path.join(self.dir, "build"), "--prefix", deps,
                            "--python", sys.executable, "--out", out, "--steps", "1"],
                           capture_output=True, text=True, env=env)
        log = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, log[-6000:])
        with open(out) as f:
            res = json.load(f)
        self.assertTrue(res["passed"])
        for part in ("model_tests", "gpu_tests", "bench_dnabert_genemask", "bench_logo_genemask"):
            self.assertEqual(res["parts"][part]["status"], "passed", part)
        self.assertRegex(p.stderr, r"(?m)^OK$")  # the GPU tests' bodies, 2 ranks among them
        # Open MPI and PMIx found their plugins and help texts in the pack: no complaint.
        self.assertNotIn("help file", log)
        self.assertNotIn("You were supposed to get help", log)

    def test_cuda_packages_are_left_to_the_node(self):
        # The script's own left_out(): CUDA's libraries as NVIDIA's packages and as Debian's
        # (the runtime and cuBLASLt, which the training library links, among them) stay out;
        # the libraries it must carry go in.
        with open(BUNDLE) as f:
            src = f.read()
        func = src[src.index("left_out() {"):src.index("\n}\n", src.index("left_out() {")) + 3]
        out = subprocess.run(["bash", "-c", func + 'for p in "$@"; do left_out "$p" && echo "$p out" || echo "$p in"; done',
                              "-", "libcudart12", "libcublaslt12", "libcublas12", "cuda-cudart-13-0", "libnccl2",
                              "libcufft11", "libnvrtc12", "libc6", "libopenmpi3", "libhdf5-103-1", "libcurl4",
                              "libcuda1"], capture_output=True, text=True, check=True).stdout.split("\n")
        self.assertEqual([l for l in out if l], ["libcudart12 out", "libcublaslt12 out", "libcublas12 out",
                                                 "cuda-cudart-13-0 out", "libnccl2 out", "libcufft11 out",
                                                 "libnvrtc12 out", "libc6 out", "libopenmpi3 in", "libhdf5-103-1 in",
                                                 "libcurl4 in", "libcuda1 out"])

    def test_archive(self):
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "gm")
            p = bundle(target, "--archive")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertEqual(os.listdir(tmp), ["gm.tar.gz"])  # no DIR, no temporary
            unpack = f"tar -xzf {target}.tar.gz -C {tmp} && "
            self.assertIn(unpack + f"scripts/gpu-check.sh --no-build --build {target}/build --prefix {target}/deps",
                          p.stdout)
            # The archive is much smaller than the pack it holds.
            size = sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(self.dir) for f in fs)
            self.assertLess(os.path.getsize(target + ".tar.gz"), 0.6 * size)
            before = os.stat(target + ".tar.gz")
            again = bundle(target, "--archive")
            self.assertEqual(again.returncode, 2, again.stderr)
            self.assertIn(f"{target}.tar.gz exists", again.stderr)
            self.assertEqual(os.stat(target + ".tar.gz"), before)
            self.assertEqual(os.listdir(tmp), ["gm.tar.gz"])
            subprocess.run(["bash", "-c", unpack.removesuffix(" && ")], check=True)
            self.assertEqual(tree(target), tree(self.dir))

    def test_refusals(self):
        before = os.listdir(self.dir)
        p = bundle(self.dir)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("exists", p.stderr)
        self.assertEqual(os.listdir(self.dir), before)
        with tempfile.TemporaryDirectory() as tmp:
            empty = os.path.join(tmp, "empty-build")
            os.makedirs(empty)
            target = os.path.join(tmp, "b")
            p = subprocess.run(["bash", BUNDLE, target, "--build", empty, "--python", sys.executable],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"{empty}/src/cli/genemask is missing", p.stderr)
            self.assertEqual(sorted(os.listdir(tmp)), ["empty-build"])
            p = subprocess.run(["bash", BUNDLE, target, "--bogus"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertIn("unknown option '--bogus'", p.stderr)
            # An option without its value: one line naming it, here and in gpu-check.sh.
            for script, opt in ((BUNDLE, "--build"), (CHECK, "--out")):
                p = subprocess.run(["bash", script, *([target] if script == BUNDLE else ["--cpu"]), opt],
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertEqual(p.stderr.strip(), f"{os.path.basename(script)}: {opt} needs a value (see --help)")
            self.assertEqual(sorted(os.listdir(tmp)), ["empty-build"])
            # A folder already named as the temporary (DIR.tmp.PID, the PID kept by exec):
            # refused, and the user's folder and its file left as they were.
            p = subprocess.run(["bash", "-c", 'd=$1.tmp.$$; mkdir "$d" && echo mine >"$d/keep" && echo "$d" && '
                                'exec bash "$2" "$1" --build "$3" --python "$4"', "-", os.path.join(tmp, "c"), BUNDLE,
                                BUILD, sys.executable], capture_output=True, text=True)
            theirs = p.stdout.split("\n")[0]
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"cannot make the temporary {theirs} (it exists", p.stderr)
            with open(os.path.join(theirs, "keep")) as f:
                self.assertEqual(f.read(), "mine\n")
            shutil.rmtree(theirs)
            self.assertEqual(sorted(os.listdir(tmp)), ["empty-build"])
            # DIR with a trailing slash: the pack is DIR itself, its temporary a sibling.
            p = subprocess.run(["bash", BUNDLE, target + "//", "--build", BUILD, "--python", sys.executable],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(sorted(os.listdir(tmp)), ["b", "empty-build"])
            self.assertEqual(sorted(os.listdir(target)), ["build", "deps"])
            # A bundle of another PyTorch: refused by gpu-check before any part.
            other = os.path.join(tmp, "other")
            shutil.copytree(os.path.join(self.dir, "build"), os.path.join(other, "build"), symlinks=True)
            meta_path = os.path.join(other, "build", "bundle.json")
            with open(meta_path) as f:
                meta = json.load(f)
            meta["torch"] = "2.0.0+cu118"
            with open(meta_path, "w") as f:
                json.dump(meta, f)
            out = os.path.join(tmp, "gpu-check.json")
            p = subprocess.run(["bash", CHECK, "--cpu", "--no-build", "--build", os.path.join(other, "build"),
                                "--python", sys.executable, "--out", out], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(f"the bundle was built with PyTorch 2.0.0+cu118, but this Python has {torch.__version__}",
                          p.stderr)
            self.assertNotIn("==", p.stdout)
            self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
