#include <cstdio>

int main() {
  std::puts("brevis");
  return 0;
}
