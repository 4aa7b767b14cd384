#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   ./build.sh demo   install what is missing, build, run the 4-rank demo
#   ./build.sh test   install what is missing, build, run the whole test suite
#                     (a normal build, then again under ASan+UBSan and under TSan,
#                     a Release build with the demo, `pip install .` into a venv)
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(cmake ninja-build g++ pkg-config libgtest-dev nlohmann-json3-dev iproute2 procps python3 openmpi-bin
          python3-dev python3-numpy python3-pytest pybind11-dev python3-torch libtorch-dev libucx-dev
          libopenblas-dev zlib1g-dev chromium python3-venv python3-pip python3-setuptools python3-wheel)
JOBS=${VIGIL_BUILD_JOBS:-$(nproc)}
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
# Where Debian's interpreter looks for packages under /usr/local.
PY_SITE=$(/usr/bin/python3 -c 'import sys; print("lib/python3.%d/dist-packages" % sys.version_info.minor)' 2>/dev/null ||
          echo lib/python3/dist-packages)

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "build.sh: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The library, its tools and the Python package (vigil, vigil.torch) under
# /usr/local, where Debian's /usr/bin/python3 finds them from any shell.
install_build() {
  $SUDO cmake --install build --prefix /usr/local >/dev/null
  $SUDO ldconfig
  (cd / && /usr/bin/python3 -c 'import vigil, vigil.torch; print("build.sh: installed vigil", vigil.__version__,
      "and vigil.torch for /usr/bin/python3 in", vigil.__path__[0].rsplit("/", 1)[0])')
}

check_tools() {
  local missing=()
  for tool in cmake ninja g++ pkg-config; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  [ -f /usr/include/gtest/gtest.h ] || missing+=("GoogleTest headers (libgtest-dev)")
  [ -f /usr/include/nlohmann/json.hpp ] || missing+=("nlohmann-json headers (nlohmann-json3-dev)")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "build.sh: missing after install: ${missing[*]}" >&2
    exit 1
  fi
}

configure_and_build() {  # dir, extra cmake args...
  local dir=$1
  shift
  # A leftover build directory from another source tree or generator gives
  # confusing errors: start it afresh.
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -q "CMAKE_HOME_DIRECTORY:INTERNAL=$PWD\$" "$dir/CMakeCache.txt"; then
    echo "build.sh: $dir belongs to another source tree; recreating it"
    rm -rf "$dir"
  fi
  cmake -S . -B "$dir" -G Ninja -DVIGIL_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

run_ctest() {  # dir
  (cd "$1" && ctest --output-on-failure -j "$JOBS" --timeout 600)
}

case "${1:-}" in
  demo)
    install_packages
    check_tools
    configure_and_build build -DVIGIL_BUILD_TESTS=OFF -DVIGIL_PYTHON_INSTALL_DIR="$PY_SITE"
    install_build
    ./build/vigil-run -n 4 ./build/vigil-demo
    ;;
  test)
    install_packages
    check_tools
    configure_and_build build -DVIGIL_BUILD_TESTS=ON -DVIGIL_PYTHON_INSTALL_DIR="$PY_SITE"
    install_build
    echo "== test suite =="
    run_ctest build
    echo "== test suite under AddressSanitizer + UndefinedBehaviorSanitizer =="
    configure_and_build build-asan -DCMAKE_BUILD_TYPE=Debug -DVIGIL_SANITIZE=address,undefined
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-asan
    echo "== test suite under ThreadSanitizer =="
    configure_and_build build-tsan -DCMAKE_BUILD_TYPE=Debug -DVIGIL_SANITIZE=thread
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run_ctest build-tsan
    # One Release build serves both: pip's CMake build (setup.py) is the
    # -O3 build of the library, the tools, the demo and the Python package.
    echo "== Release build (-O3, warnings as errors) by pip install . into a fresh virtual environment (offline) =="
    VIGIL_CMAKE_BUILD_DIR="$PWD/build-release" VIGIL_CMAKE_ARGS="-DVIGIL_WERROR=ON" \
      sh tests/install/check_pip_install.sh "$PWD" build-venv
    echo "== the demo, from the Release build =="
    ./build-release/vigil-run -n 4 --timeout 120 ./build-release/vigil-demo
    ;;
  *)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
