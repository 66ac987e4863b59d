// placeholder: being written (schedule lowering and simulation figures)
#include <benchmark/benchmark.h>
BENCHMARK_MAIN();
