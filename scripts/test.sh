#!/usr/bin/env bash
# Fresh machine -> every test: installs dependencies, builds with warnings as errors, runs ctest; then
# the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (gcc, ./build-asan), and
# each libFuzzer target for MGT_FUZZ_SECONDS (default 10) seconds (clang-14, ./build-fuzz). Any
# sanitizer report or fuzzer finding fails. docs/hardening.md.
#   MGT_SANITIZE=0 skips the sanitizer build, MGT_FUZZ=0 the fuzz run (both on by default).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage says when it starts and how long the run has taken so far, so that a slow CI run shows where.
stage() { echo "== scripts/test.sh: $1 (at $(date -u +%T), ${SECONDS} s in)"; }
stage "install dependencies"
bash scripts/install-deps.sh
stage "release build"
bash scripts/build.sh -DMGT_WERROR=ON
stage "release tests"
ctest --test-dir build --output-on-failure -j "${MGT_TEST_JOBS:-2}"

launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

if [ "${MGT_SANITIZE:-1}" != 0 ]; then
  # -O1 keeps the sanitizer build quick to compile. Every test runs here, the MPI programs included,
  # but two slow sweeps (they ran in ./build above). The CUDA backend is left to ./build: without a
  # device its tests only skip, and ASan's shadow memory does not run under the CUDA driver anyway.
  cmake -S . -B build-asan -G Ninja -DMGT_WERROR=ON -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
    -DMGT_SANITIZE=address,undefined -DMGT_BUILD_BENCH=OFF -DMGT_ENABLE_CUDA=OFF "${launcher[@]}"
  stage "sanitizer build"
  cmake --build build-asan -j "${MGT_BUILD_JOBS:-2}"
  reports="$PWD/build-asan/sanitizer-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  # Reports also go to files, so that one inside a child process whose exit status a test expects to
  # be non-zero (the CLI tests) still fails the run.
  export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:log_path=$reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
  # Ranks that mpirun starts (the CLI tests' multi-rank runs) keep every check but the leak check:
  # Open MPI's allocations there come from components it unloads, which no suppression can name.
  export OMPI_MCA_mca_base_env_list="ASAN_OPTIONS=abort_on_error=1:detect_leaks=0:log_path=$reports/asan-mpi"
  # Also left to ./build: the two plan sweeps, 20 to 60 times slower under the sanitizers (minutes each),
  # and the bounded-work tests, whose time bounds are set for the optimised build.
  stage "sanitizer tests"
  ctest --test-dir build-asan --output-on-failure -j "${MGT_TEST_JOBS:-2}" \
    -E 'SweepOfValidPlansVerifiesAfterEveryPass|estimator_and_simulator_agree|CliBoundedWork'
  if [ -n "$(ls -A "$reports")" ]; then
    echo "sanitizer reports:" >&2
    cat "$reports"/* >&2
    exit 1
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS OMPI_MCA_mca_base_env_list
fi

if [ "${MGT_FUZZ:-1}" != 0 ]; then
  # Each libFuzzer target briefly from its seeds (clang-14, ./build-fuzz); scripts/fuzz fails on any finding.
  # A fixed libFuzzer seed keeps CI reproducible; long exploring runs are scripts/fuzz SECONDS.
  stage "fuzz"
  MGT_FUZZ_SEED="${MGT_FUZZ_SEED:-1}" bash scripts/fuzz "${MGT_FUZZ_SECONDS:-10}"
fi
stage "done"
