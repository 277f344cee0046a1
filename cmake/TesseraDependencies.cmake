# Every dependency comes from a Debian 12 package, except LibTorch, which comes from
# PyPI's torch wheel (scripts/setup.sh installs them all).

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

# LibTorch: the one inside PyPI's torch wheel, installed by scripts/setup.sh into
# the project's virtual environment (TESSERA_PYTHON, default ./.venv or
# $TESSERA_VENV), found through torch.utils.cmake_prefix_path. A lab that builds
# against its own CUDA LibTorch passes -DTESSERA_TORCH_DIR=<libtorch>/share/cmake/Torch
# (or a prefix holding it). The CUDA build is required: NCCL, the GPU benchmark
# and the CUDA allocator's statistics are compiled into every build and chosen at
# run time, so CI compiles the GPU path too.
set(TESSERA_TORCH_DIR "" CACHE PATH "Torch CMake config dir or prefix (default: the venv's torch)")
if(DEFINED ENV{TESSERA_VENV} AND NOT "$ENV{TESSERA_VENV}" STREQUAL "")
  set(_tessera_default_python "$ENV{TESSERA_VENV}/bin/python")
else()
  set(_tessera_default_python "${PROJECT_SOURCE_DIR}/.venv/bin/python")
endif()
set(TESSERA_PYTHON "${_tessera_default_python}" CACHE FILEPATH
    "Python whose torch the build links and the Python tests and benchmarks run")
if(TESSERA_TORCH_DIR)
  if(EXISTS "${TESSERA_TORCH_DIR}/TorchConfig.cmake")
    set(Torch_DIR "${TESSERA_TORCH_DIR}")
  else()
    list(PREPEND CMAKE_PREFIX_PATH "${TESSERA_TORCH_DIR}")
  endif()
elseif(EXISTS "${TESSERA_PYTHON}")
  execute_process(
    COMMAND "${TESSERA_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _tessera_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _tessera_torch_rc ERROR_QUIET)
  if(NOT _tessera_torch_rc EQUAL 0)
    message(FATAL_ERROR "${TESSERA_PYTHON} has no torch: run scripts/setup.sh, or pass "
                        "-DTESSERA_TORCH_DIR=<your LibTorch>")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${_tessera_torch_prefix}")
  # The wheel's own NCCL headers match the NCCL library its torch loads.
  execute_process(
    COMMAND "${TESSERA_PYTHON}" -c
            "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'include'))"
    OUTPUT_VARIABLE _tessera_nccl_include OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
else()
  message(FATAL_ERROR "No LibTorch: ${TESSERA_PYTHON} does not exist. Run scripts/setup.sh "
                      "(it installs PyPI's torch into .venv), or pass -DTESSERA_TORCH_DIR=...")
endif()
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
# Tessera compiles no CUDA code of its own; a fixed list keeps Torch's config from
# probing for a GPU at configure time (a machine without one fails that probe).
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
endif()
find_package(Torch REQUIRED)
if(NOT TARGET torch_cuda)
  message(FATAL_ERROR "The LibTorch found (${Torch_DIR}) is not a CUDA build. Tessera links a "
                      "CUDA LibTorch everywhere (scripts/setup.sh installs one); it runs on CPUs too.")
endif()
add_library(tessera_torch INTERFACE)
target_link_libraries(tessera_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(tessera_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
if(_tessera_nccl_include AND EXISTS "${_tessera_nccl_include}/nccl.h")
  target_include_directories(tessera_torch SYSTEM BEFORE INTERFACE "${_tessera_nccl_include}")
endif()
# The wheel's libtorch.so exports its own copies of std::filesystem's functions
# (built into it for its old-toolchain build), and some of them crash when called
# from our code (remove_all jumps to a null pointer). Whatever libstdc++ symbol a
# binary looks up must come from the system's libstdc++, so it is made the first
# library a torch-linked binary needs: the dynamic linker searches them in order.
target_link_options(tessera_torch INTERFACE
                    "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(tessera_torch INTERFACE ${_torch_flags})
get_filename_component(TESSERA_TORCH_LIB_DIR "${TORCH_LIBRARY}" DIRECTORY)
message(STATUS "Tessera: LibTorch ${Torch_VERSION} at ${TESSERA_TORCH_LIB_DIR}, CUDA LibTorch ON "
               "(CUDA ${CUDAToolkit_VERSION})")

if(TESSERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(TESSERA_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
