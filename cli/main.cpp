// trainsim command line: everything is in run_cli (app.hpp), which the tests call in-process.
#include "cli/app.hpp"

int main(int argc, char** argv) { return trainsim::cli::run_cli(argc, argv); }
