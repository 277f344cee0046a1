# Every dependency comes from a Debian 12 package (scripts/setup.sh installs them).

find_package(Threads REQUIRED)
find_package(Boost 1.81 REQUIRED CONFIG COMPONENTS headers)
find_package(SQLite3 REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)

# LibTorch (CPU build from libtorch-dev, or a CUDA LibTorch if one is on
# CMAKE_PREFIX_PATH). Wrapped in an interface target with SYSTEM includes.
find_package(Torch REQUIRED)
add_library(tessera_torch INTERFACE)
target_link_libraries(tessera_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(tessera_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(tessera_torch INTERFACE ${_torch_flags})

# The CUDA / NCCL path is compiled only when the toolkit is found AND the
# LibTorch we link was built with CUDA; it is selected at run time.
find_package(CUDAToolkit QUIET)
set(TESSERA_HAVE_CUDA_TORCH OFF)
if(CUDAToolkit_FOUND AND TARGET torch_cuda)
  set(TESSERA_HAVE_CUDA_TORCH ON)
endif()
message(STATUS "Tessera: CUDA toolkit ${CUDAToolkit_FOUND}, CUDA LibTorch ${TESSERA_HAVE_CUDA_TORCH}")

if(TESSERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(TESSERA_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
