# The GPU stage's kernels (src/gpu/kernels.cu, issue 19): compiled by nvcc
# into a fatbin for the GPUs CUDA 12/13 support with JPEG work worth
# placing (Turing T4 sm_75, Ampere sm_80 — its code also runs on sm_86 and
# sm_89 —, Hopper sm_90, plus sm_90 PTX for newer chips), embedded as
# sl__gpu_fatbin_bytes (cmake/Embed.cmake) and loaded at run time through
# the dlopen'ed CUDA runtime (src/gpu/kernel_load.c). No CUDA library is
# linked, so the library still runs where there is none.
#
# SL_CUDA: AUTO (default: built where nvcc is found), ON (nvcc required),
# OFF. Sets SL_HAVE_GPU_STAGE (0/1) and SL_GPU_FATBIN_C (generated source).
set(SL_CUDA AUTO CACHE STRING "GPU stage kernels: AUTO, ON or OFF")
set(SL_HAVE_GPU_STAGE 0)
set(SL_GPU_FATBIN_C)
if(NOT SL_CUDA STREQUAL "OFF")
  find_program(SL_NVCC nvcc HINTS ENV CUDA_HOME PATH_SUFFIXES bin
               PATHS /usr/local/cuda/bin)
  if(SL_NVCC)
    set(bin ${CMAKE_BINARY_DIR}/generated/gpu_kernels.fatbin)
    set(SL_GPU_FATBIN_C ${CMAKE_BINARY_DIR}/generated/gpu_kernels.c)
    set(src ${PROJECT_SOURCE_DIR}/src)
    add_custom_command(OUTPUT ${bin}
      COMMAND ${SL_NVCC} -fatbin -O3 -I${src}
              -gencode arch=compute_75,code=sm_75
              -gencode arch=compute_80,code=sm_80
              -gencode arch=compute_90,code=sm_90
              -gencode arch=compute_90,code=compute_90
              -o ${bin} ${src}/gpu/kernels.cu
      DEPENDS ${src}/gpu/kernels.cu ${src}/gpu/resample.h
      COMMENT "nvcc src/gpu/kernels.cu (fatbin)")
    add_custom_command(OUTPUT ${SL_GPU_FATBIN_C}
      COMMAND ${CMAKE_COMMAND} -DIN=${bin} -DOUT=${SL_GPU_FATBIN_C}
              -DNAME=sl__gpu_fatbin -DWHAT=src/gpu/kernels.cu
              -P ${PROJECT_SOURCE_DIR}/cmake/Embed.cmake
      DEPENDS ${bin} ${PROJECT_SOURCE_DIR}/cmake/Embed.cmake
      COMMENT "Embedding the GPU kernels")
    set(SL_HAVE_GPU_STAGE 1)
    message(STATUS "GPU stage: kernels built by ${SL_NVCC}")
  elseif(SL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SL_CUDA=ON but no nvcc found (set CUDA_HOME)")
  else()
    message(STATUS "GPU stage: off (no nvcc; placement gpu will say so)")
  endif()
endif()
