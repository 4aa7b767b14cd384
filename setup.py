"""`pip install .`: vigil's CMake build, installed as the Python package.

The extension modules (vigil._vigil, vigil.torch._vigil_torch) and
libvigil.so come from CMake: configure with the installing interpreter,
build, `cmake --install` into a staging prefix laid out for a wheel
(libvigil.so in vigil/_lib, found by the modules through $ORIGIN), then the
staged `vigil` folder is what the wheel holds.

Environment:
  VIGIL_CMAKE_BUILD_DIR  the CMake tree to build in (default: build-pip in
                         the source tree; an existing tree is reused, so a
                         second `pip install .` rebuilds only what changed)
  VIGIL_CMAKE_ARGS       more arguments for the configure step
  CMAKE_BUILD_PARALLEL_LEVEL  jobs (default: the CPU count)
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PY_DIR = "python-package"  # VIGIL_PYTHON_INSTALL_DIR inside the staging prefix
LIB_DIR = f"{PY_DIR}/vigil/_lib"


def version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(vigil VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = Path(os.environ.get("VIGIL_CMAKE_BUILD_DIR") or ROOT / "build-pip").resolve()
        stage = build_dir / "wheel-stage"
        shutil.rmtree(stage, ignore_errors=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DVIGIL_TORCH_PYTHON={sys.executable}",
            f"-DVIGIL_PYTHON_INSTALL_DIR={PY_DIR}",
            f"-DCMAKE_INSTALL_LIBDIR={LIB_DIR}",
            "-DVIGIL_BUILD_PYTHON=ON",
        ]
        if not (build_dir / "CMakeCache.txt").exists():
            configure += ["-DCMAKE_BUILD_TYPE=Release", "-DVIGIL_BUILD_TESTS=OFF"]
            if shutil.which("ninja"):
                configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("VIGIL_CMAKE_ARGS", ""))
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        self.announce(f"vigil: CMake build in {build_dir}", level=2)
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "-j", jobs], check=True)
        subprocess.run(["cmake", "--install", str(build_dir), "--prefix", str(stage)], check=True,
                       stdout=subprocess.DEVNULL)
        package = stage / PY_DIR / "vigil"
        if not (package / "__init__.py").exists():
            sys.exit("vigil: CMake did not build the Python package (pybind11-dev, python3-dev and numpy are needed; "
                     "see the configure output above)")
        if not (package / "torch").exists():
            print("vigil: built without vigil.torch (this interpreter cannot import torch, or libtorch-dev is "
                  "missing)", file=sys.stderr)
        keep_only_soname(package / "_lib")
        target = Path(self.build_lib) / "vigil"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(package, target)


def keep_only_soname(lib_dir):
    """The modules load libvigil.so.<major> (its SONAME): a wheel holds that
    file alone (a zip has no symlinks), without CMake's and pkg-config's files."""
    for extra in ("cmake", "pkgconfig"):
        shutil.rmtree(lib_dir / extra, ignore_errors=True)
    real = (lib_dir / "libvigil.so").resolve()
    major = real.name.split(".so.")[1].split(".")[0]
    soname = lib_dir / f"libvigil.so.{major}"
    data = real.read_bytes()
    for path in lib_dir.glob("libvigil.so*"):
        path.unlink()
    soname.write_bytes(data)
    soname.chmod(0o755)


setup(
    version=version(),
    ext_modules=[Extension("vigil._vigil", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
