# Sourced by the scripts that configure a build tree. cmake_generator DIR
# prints the generator options for DIR: Ninja for a new tree when it is
# installed, since it compiles a library's sources while the libraries it
# links are still being archived (Makefiles wait for them), so both cores
# stay busy: the demo's binaries build in about two thirds of the time. A
# tree already configured keeps its generator, which CMake will not change.
cmake_generator() {
  if [ ! -f "$1/CMakeCache.txt" ] && command -v ninja >/dev/null; then echo "-G Ninja"; fi
}
