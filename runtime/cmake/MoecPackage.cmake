# The runtime as a CMake package, in the build tree and in an install:
#   <prefix>/lib/libmoec_{kernels,kernels_cuda,runtime,tooling}.a
#   <prefix>/include/moec/...                 (the public headers)
#   <prefix>/lib/cmake/moec/moecConfig.cmake  (+ version, exported targets)
# find_package(moec) gives moec::kernels, moec::kernels_cuda (with CUDA),
# moec::runtime and moec::tooling. Included by runtime/CMakeLists.txt once its
# libraries are defined; the whole project adds the tools (bin/) to the install.
include(CMakePackageConfigHelpers)

set(MOEC_VERSION 0.1.0)
get_property(moec_exported GLOBAL PROPERTY MOEC_EXPORTED_TARGETS)
set(moec_package_dir lib/cmake/moec)

install(TARGETS ${moec_exported} EXPORT moecTargets
  ARCHIVE DESTINATION lib COMPONENT moec-runtime
  INCLUDES DESTINATION include)
set(moec_header_excludes)
if(NOT MOEC_ENABLE_CUDA)
  set(moec_header_excludes PATTERN "cuda" EXCLUDE PATTERN "Cuda.h" EXCLUDE)
endif()
install(DIRECTORY ${MOEC_RUNTIME_SOURCE_DIR}/include/moec DESTINATION include
  COMPONENT moec-runtime ${moec_header_excludes})

# moecConfig.cmake: the same file for both trees; only the targets file differs
# (absolute build-tree paths, or paths relative to the install prefix).
set(MOEC_PACKAGE_HAS_CUDA ${MOEC_ENABLE_CUDA})
configure_file(${MOEC_RUNTIME_SOURCE_DIR}/cmake/moecConfig.cmake.in
  ${CMAKE_BINARY_DIR}/${moec_package_dir}/moecConfig.cmake @ONLY)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/${moec_package_dir}/moecConfigVersion.cmake
  VERSION ${MOEC_VERSION} COMPATIBILITY SameMinorVersion)
export(EXPORT moecTargets NAMESPACE moec::
  FILE ${CMAKE_BINARY_DIR}/${moec_package_dir}/moecTargets.cmake)
install(EXPORT moecTargets NAMESPACE moec:: DESTINATION ${moec_package_dir}
  COMPONENT moec-runtime)
install(FILES ${CMAKE_BINARY_DIR}/${moec_package_dir}/moecConfig.cmake
              ${CMAKE_BINARY_DIR}/${moec_package_dir}/moecConfigVersion.cmake
  DESTINATION ${moec_package_dir} COMPONENT moec-runtime)
