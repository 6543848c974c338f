// Replays fuzz inputs without libFuzzer: each argument is a file or a
// directory (read recursively). Lets ctest run the committed corpus.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(uint8_t const* data, size_t size);

namespace {

void replay(std::filesystem::path const& p, size_t& count) {
  std::ifstream in(p, std::ios::binary);
  std::vector<uint8_t> data(std::istreambuf_iterator<char>(in), {});
  LLVMFuzzerTestOneInput(data.data(), data.size());
  ++count;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    fs::path const arg = argv[i];
    if (fs::is_directory(arg)) {
      for (auto const& e : fs::recursive_directory_iterator(arg)) {
        if (e.is_regular_file()) replay(e.path(), count);
      }
    } else if (fs::is_regular_file(arg)) {
      replay(arg, count);
    } else {
      std::fprintf(stderr, "no such file or directory: %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("replayed %zu inputs\n", count);
  return count > 0 ? 0 : 1;
}
