#include "src/commands.h"

int main(int argc, char** argv) { return brevis::cli::run_cli(argc, argv); }
