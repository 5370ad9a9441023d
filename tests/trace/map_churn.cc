// An allocation-bound C++ program for measuring what tracing costs at its
// worst (tests/trace/measure_overhead.sh): a std::map<std::string,
// std::vector<int>> filled and cleared, two allocations and two frees per
// element, about 7 million allocator calls per second on the development
// VM.  Argument: elements per round (5 rounds; default 200000).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  std::map<std::string, std::vector<int>> m;
  size_t total = 0;
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < n; i++) m["key-" + std::to_string(i)].push_back(i);
    total += m.size();
    m.clear();
  }
  std::printf("%zu elements\n", total);
  return 0;
}
