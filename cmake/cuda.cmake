# CUDA + cuBLAS + NCCL detection (STACK.md §3). Sets MGT_HAVE_CUDA; when nvcc or NCCL is missing, or
# -DMGT_ENABLE_CUDA=OFF, the build goes on without the CUDA backend and says so.
set(MGT_HAVE_CUDA OFF)
if(NOT MGT_ENABLE_CUDA)
  message(STATUS "mgt: CUDA backend off (-DMGT_ENABLE_CUDA=OFF)")
  return()
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)  # the toolkit's usual place, also when not on PATH
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "mgt: nvcc not found: building without the CUDA backend (mgt-plan --version lists cpu only)")
  return()
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)  # H100/H200 SASS + PTX for newer GPUs; never "native"
endif()
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)  # Static would put both -lcudart_static and libcudart.so on the link line
set(CMAKE_CUDA_STANDARD 17)             # CMake 3.25 has no CUDA20 for nvcc; the .cu files are C++17
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(STATUS "mgt: nvcc found but NCCL (nccl.h, libnccl) is missing: building without the CUDA backend")
  return()
endif()
add_library(NCCL::nccl UNKNOWN IMPORTED)
set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
set(MGT_HAVE_CUDA ON)
message(STATUS "mgt: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}, "
               "NCCL ${NCCL_LIBRARY})")
