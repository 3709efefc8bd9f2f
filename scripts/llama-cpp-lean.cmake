# Included right after llama-cpp-python's project() call (scripts/bootstrap.sh passes it as
# CMAKE_PROJECT_llama_cpp_INCLUDE) to leave out what the embedded server never loads.
#
# llama-cpp-python's CMakeLists forces LLAMA_BUILD_COMMON=ON into the cache, so -D cannot turn
# it off; it builds and installs libllama-common (arg parsing, chat parsers, downloads, an HTTP
# client: about a third of the build) that its Python code never loads. A normal variable set
# here shadows that cache entry (policy CMP0126, on from CMake 3.21, which llama-cpp-python
# requires), and llama.cpp's own option() keeps it (CMP0077), so common and cpp-httplib are
# not built. llama.cpp's tools, examples, tests and server are already off when it is built as
# a subproject; the multimodal library is turned off with -DLLAVA_BUILD=OFF on the command line.
set(LLAMA_BUILD_COMMON OFF)
