# Turns on CMake's CUDA language for sm_90a when MOEC_ENABLE_CUDA is set and nvcc
# is found; otherwise sets MOEC_ENABLE_CUDA to OFF. Shared by the whole project
# and by runtime/ built alone.
macro(moec_enable_cuda)
  if(MOEC_ENABLE_CUDA)
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        # Hopper with its architecture-specific features (wgmma, TMA).
        set(CMAKE_CUDA_ARCHITECTURES 90a-real)
      endif()
      enable_language(CUDA)
    else()
      message(STATUS "moec: no CUDA compiler found; building without CUDA")
      set(MOEC_ENABLE_CUDA OFF)
    endif()
  endif()
endmacro()
