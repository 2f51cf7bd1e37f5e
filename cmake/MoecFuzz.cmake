# The libFuzzer targets as ctests (label `fuzz`, docs/fuzzing.md). Each test runs
# one target for MOEC_FUZZ_SECONDS over its committed seed corpus; what it finds
# goes to a scratch folder of the build tree (never into the committed corpus),
# and a crash, leak, UBSan report, timeout or out-of-memory fails the test.
set(MOEC_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz ctest runs its target")

# moec_add_fuzz_test(NAME EXECUTABLE CORPUS [libFuzzer flags...])
function(moec_add_fuzz_test name executable corpus)
  set(scratch "${CMAKE_BINARY_DIR}/fuzz-scratch/${name}")
  add_test(NAME fuzz.${name}
    COMMAND sh -c "rm -rf \"$0\" && mkdir -p \"$0\" && exec \"$@\""
            ${scratch} ${executable}
            -max_total_time=${MOEC_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048
            -print_final_stats=1 -artifact_prefix=${scratch}/ ${ARGN} ${scratch} ${corpus})
  # libMLIR.so is not instrumented: LLVM's BumpPtrAllocator, inlined into the
  # fuzzers' instrumented code, poisons its slabs by hand, and libMLIR.so's
  # own copy then writes into them without unpoisoning (a false
  # use-after-poison in MLIR's attribute storage). Hand poisoning is off;
  # every instrumented access is still checked.
  set_tests_properties(fuzz.${name} PROPERTIES LABELS "fuzz"
    TIMEOUT 600 ENVIRONMENT "ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=1")
endfunction()

# The six targets and their corpora, relative to the source tree.
macro(moec_add_fuzz_tests bindir)
  moec_add_fuzz_test(onnx-import ${bindir}/moec-fuzz-onnx-import
    ${PROJECT_SOURCE_DIR}/test/fuzz/onnx-corpus -max_len=16384)
  moec_add_fuzz_test(npz ${bindir}/moec-fuzz-npz
    ${PROJECT_SOURCE_DIR}/runtime/test/fuzz/npz-corpus -max_len=65536)
  moec_add_fuzz_test(manifest ${bindir}/moec-fuzz-manifest
    ${PROJECT_SOURCE_DIR}/runtime/test/fuzz/manifest-corpus -max_len=16384)
  moec_add_fuzz_test(bundle ${bindir}/moec-fuzz-bundle
    ${PROJECT_SOURCE_DIR}/runtime/test/fuzz/bundle-corpus -max_len=16384)
  moec_add_fuzz_test(safetensors ${bindir}/moec-fuzz-safetensors
    ${PROJECT_SOURCE_DIR}/test/fuzz/safetensors-corpus -max_len=16384)
  moec_add_fuzz_test(store-frame ${bindir}/moec-fuzz-store-frame
    ${PROJECT_SOURCE_DIR}/runtime/test/fuzz/store-frame-corpus -max_len=4096)
endmacro()

# In an ordinary build (any compiler): with MOEC_FUZZ_TESTS (AUTO: where
# clang++-22 links -fsanitize=fuzzer), fuzz/ of the build tree is a second
# build of this project with clang-22 and -DMOEC_BUILD_FUZZERS=ON that makes
# only the fuzzers (and what they link, instrumented, without CUDA); it
# is rebuilt with this build, and its targets are this build's fuzz ctests.
function(moec_fuzz_subbuild)
  if(MOEC_FUZZ_TESTS STREQUAL "OFF" OR NOT MOEC_FUZZ_TESTS)
    return()
  endif()
  find_program(MOEC_FUZZ_CXX clang++-22)
  find_program(MOEC_FUZZ_CC clang-22)
  set(usable FALSE)
  if(MOEC_FUZZ_CXX AND MOEC_FUZZ_CC)
    # libFuzzer and the sanitizer runtimes: Debian's libclang-rt-22-dev.
    set(probe ${CMAKE_BINARY_DIR}/CMakeFiles/moec-fuzz-probe.cpp)
    file(WRITE ${probe} "#include <cstddef>\n#include <cstdint>\nextern \"C\" int "
                        "LLVMFuzzerTestOneInput(const uint8_t *, size_t) { return 0; }\n")
    execute_process(COMMAND ${MOEC_FUZZ_CXX} -fsanitize=fuzzer,address,undefined ${probe}
                            -o ${CMAKE_BINARY_DIR}/CMakeFiles/moec-fuzz-probe
                    RESULT_VARIABLE failed OUTPUT_QUIET ERROR_QUIET)
    if(NOT failed)
      set(usable TRUE)
    endif()
  endif()
  if(NOT usable)
    if(MOEC_FUZZ_TESTS STREQUAL "AUTO")
      message(STATUS "moec: no fuzz ctests (clang++-22 with libFuzzer not found: "
                     "apt-get install clang-22 libclang-rt-22-dev)")
      return()
    endif()
    message(FATAL_ERROR "MOEC_FUZZ_TESTS=ON needs clang++-22 and libclang-rt-22-dev")
  endif()
  message(STATUS "moec: fuzz ctests built with ${MOEC_FUZZ_CXX} in ${CMAKE_BINARY_DIR}/fuzz")
  include(ExternalProject)
  set(fuzz_dir ${CMAKE_BINARY_DIR}/fuzz)
  ExternalProject_Add(moec-fuzz-build
    SOURCE_DIR ${PROJECT_SOURCE_DIR}
    BINARY_DIR ${fuzz_dir}
    PREFIX ${CMAKE_BINARY_DIR}/fuzz-ep
    CMAKE_ARGS -DCMAKE_BUILD_TYPE=Release -DMOEC_BUILD_FUZZERS=ON -DMOEC_ENABLE_CUDA=OFF
               -DMOEC_FUZZ_TESTS=OFF
               -DCMAKE_C_COMPILER=${MOEC_FUZZ_CC} -DCMAKE_CXX_COMPILER=${MOEC_FUZZ_CXX}
               -DMLIR_DIR=${MLIR_DIR} -DLLVM_DIR=${LLVM_DIR}
               -DLLVM_EXTERNAL_LIT=${LLVM_EXTERNAL_LIT}
               -DPython3_EXECUTABLE=${Python3_EXECUTABLE}
               -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER}
               -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
    BUILD_COMMAND ${CMAKE_COMMAND} --build ${fuzz_dir} --target moec-fuzzers
    BUILD_ALWAYS ON
    INSTALL_COMMAND ""
    EXCLUDE_FROM_ALL OFF)
  moec_add_fuzz_tests(${fuzz_dir}/bin)
endfunction()
