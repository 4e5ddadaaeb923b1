"""The package itself: a wheel builds and holds the module, the stubs and the typing marker;
its version is the CLI's; the extension needs neither LibTorch, MPI nor HDF5; the
checked-in stubs are what nanobind's stubgen makes of the built module."""
import os
import subprocess
import sys
import zipfile

import genemask
import genemask._core

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wheel_builds_with_the_module_stubs_and_version(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                    str(tmp_path), PYTHON_DIR], check=True, capture_output=True, text=True)
    wheels = list(tmp_path.glob("genemask-*.whl"))
    assert len(wheels) == 1, wheels
    assert wheels[0].name.startswith(f"genemask-{genemask.__version__}-")
    names = zipfile.ZipFile(wheels[0]).namelist()
    for want in ("genemask/__init__.py", "genemask/hf.py", "genemask/_core.pyi", "genemask/py.typed"):
        assert want in names, (want, names)
    assert any(n.startswith("genemask/_core.") and n.endswith(".so") for n in names), names


def test_the_extension_needs_no_torch_mpi_or_hdf5():
    libs = subprocess.run(["ldd", genemask._core.__file__], check=True, capture_output=True, text=True).stdout
    for lib in ("libtorch", "libc10", "libmpi", "libhdf5"):
        assert lib not in libs, libs
    # importing genemask does not import torch either (genemask.hf does)
    code = "import sys, genemask; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"


def test_stubs_are_current(tmp_path):
    out = tmp_path / "_core.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "genemask._core", "-o", str(out)],
                   check=True, capture_output=True, text=True)
    with open(os.path.join(PYTHON_DIR, "src", "genemask", "_core.pyi")) as f:
        assert out.read_text() == f.read(), "regenerate: python -m nanobind.stubgen -m genemask._core -o python/src/genemask/_core.pyi"
