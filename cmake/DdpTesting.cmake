# ddp_add_test(): one Catch2 executable per chapter and layer, each test case of it
# registered with ctest as "<chapter>.<layer>: <test case>" under the labels `chNN` and
# `<layer>`, so that `ctest -L ch01` runs exactly what chapter 01 promises.
#
#   ddp_add_test(NAME test_ch01_tensor CHAPTER ch01 LAYER tensor
#                SOURCES a.cpp b.cpp LIBS ddp::tensor [CUDA] [TIMEOUT 60]
#                [DEFINITIONS NAME="value" ...])
#
# CUDA marks a test that needs a GPU: its main() (tests/support/cuda_main.cpp) exits
# with code 77 when no GPU is usable, and ctest reports that as "Skipped", never as
# a pass. Tests are always built with assert() on (NDEBUG removed), whatever the preset.
include_guard(GLOBAL)
include(DdpExercises)  # ddp_is_exercise_program, ddp_exercise_test_twins
if(DDP_BUILD_TESTS)
  include(Catch)
  # Here, at the top level and before any add_subdirectory(), so that tests declared
  # anywhere (tutorial/, bench/, tests/) reach ctest.
  enable_testing()
endif()

set(DDP_SKIP_RETURN_CODE 77)

# The environment of every test that starts processes as a user does (ddprun, mpirun):
# Open MPI as root; vader's single-copy (CMA) needs ptrace rights that containers often
# lack; loopback only; one OpenMP thread per rank.
set(DDP_PROCESS_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;\
OMPI_MCA_btl_vader_single_copy_mechanism=none;OMPI_MCA_btl_tcp_if_include=lo;\
OMPI_MCA_oob_tcp_if_include=lo;OMP_NUM_THREADS=1")

# ---- Sanitizer builds (the asan and tsan presets) ------------------------------------
# Note [Tests under sanitizers]
# A sanitized program runs several times slower and keeps more memory resident (ASan's
# shadow and its quarantine of freed blocks, TSan's shadow), so a sanitizer build scales
# the limits that tests set for the release build, here and nowhere else:
#   DDP_TEST_TIME_SCALE    multiplies every ctest TIMEOUT (ddp_test_timeout() below), and
#                          reaches the tests as $DDP_TEST_TIME_SCALE for the bounds they
#                          set themselves (run_forked's alarm: tests/ch05/fork_ranks.hpp)
#   DDP_TEST_MEMORY_SCALE  reaches the tests as $DDP_TEST_MEMORY_SCALE, which the tests
#                          that bound their own memory read (tests/support/test_scale.hpp)
# A release build keeps 1 and 1: its limits are never loosened. The sanitizers' options
# travel with every test (DDP_SANITIZER_ENV), so that plain `ctest --test-dir build/asan`
# behaves as the preset does; their suppressions name only third-party libraries
# (cmake/sanitizers/*.supp, one comment per entry). The tests labelled `cluster` are left
# out of both presets (CMakePresets.json): they submit SLURM jobs, whose limits
# (tests/cluster/run_job.sh) are not scaled and which these options do not reach. The tsan
# preset also leaves out the store's memory-bound test ("holds back a client that never
# reads its replies"): under TSan the process kept growing for the test's 2 s whatever the
# bound (403 MiB at x2, 606 MiB at x3), so there it measures TSan, not the store.
#
# Open MPI never frees its tables, and the components it dlopen()s are unloaded before
# LeakSanitizer reports, so with ASan's fast unwinder (frame pointers, which Open MPI's
# libraries lack) such a leak's stack is one frame in an "<unknown module>" that no
# suppression can name. Tests that start ranks under mpirun (ddp_add_process_test sees
# the launcher in their command) therefore record allocation stacks with the slow,
# DWARF-based unwinder (fast_unwind_on_malloc=0): slower (MPI_Init: ~2-3x), and every
# leak of Open MPI then has libmpi, libopen-pal, libopen-rte or libevent in its stack.
set(DDP_SANITIZER_SUPPRESSIONS ${CMAKE_CURRENT_LIST_DIR}/sanitizers)
set(DDP_SANITIZER_MPI_ENV "")
if(DDP_SANITIZER STREQUAL "address")
  # x5: ddp-train under ASan took ~45 s a run on the shared 2-core box, and the resume
  # test makes ~10 runs (release: 120 s; x3 timed out at 360 s, the checks all passing).
  set(DDP_TEST_TIME_SCALE 5)
  set(DDP_TEST_MEMORY_SCALE 1.5)
  set(_ddp_asan "detect_leaks=1:abort_on_error=1")
  set(DDP_SANITIZER_ENV
    "ASAN_OPTIONS=${_ddp_asan}"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    "LSAN_OPTIONS=suppressions=${DDP_SANITIZER_SUPPRESSIONS}/lsan-openmpi.supp:print_suppressions=0")
  set(DDP_SANITIZER_MPI_ENV "ASAN_OPTIONS=${_ddp_asan}:fast_unwind_on_malloc=0")
elseif(DDP_SANITIZER STREQUAL "thread")
  set(DDP_TEST_TIME_SCALE 8)  # TSan: 5-15x (a ch05 ddprun test: 156 s, limit 120 s in release)
  set(DDP_TEST_MEMORY_SCALE 2)
  # One OpenMP thread per process: libgomp is not instrumented, so TSan cannot see its
  # barriers and would call every parallel loop a race (cmake/sanitizers/tsan.supp).
  set(DDP_SANITIZER_ENV
    "TSAN_OPTIONS=suppressions=${DDP_SANITIZER_SUPPRESSIONS}/tsan.supp:halt_on_error=1:\
second_deadlock_stack=1:print_suppressions=0"
    "OMP_NUM_THREADS=1")
else()
  set(DDP_TEST_TIME_SCALE 1)
  set(DDP_TEST_MEMORY_SCALE 1)
  set(DDP_SANITIZER_ENV "")
endif()
list(APPEND DDP_SANITIZER_ENV "DDP_TEST_TIME_SCALE=${DDP_TEST_TIME_SCALE}"
                              "DDP_TEST_MEMORY_SCALE=${DDP_TEST_MEMORY_SCALE}")
list(APPEND DDP_PROCESS_ENV ${DDP_SANITIZER_ENV})

# ddp_test_timeout(<out-var> <seconds>): a test's TIMEOUT for this build, the release
# build's seconds times DDP_TEST_TIME_SCALE.
function(ddp_test_timeout out seconds)
  math(EXPR scaled "${seconds} * ${DDP_TEST_TIME_SCALE}")
  set(${out} ${scaled} PARENT_SCOPE)
endfunction()


# Catch2's implementation, compiled once (tests/support/catch_session.cpp, for our console
# width: Note [Console width]), and the two main()s of the tests over it: ddp_catch_main
# (catch_main.cpp) and, for the tests that need a GPU, ddp_catch_cuda_main (cuda_main.cpp:
# Skipped without one). Instead of Catch2::Catch2WithMain.
function(ddp_add_catch_mains)
  if(NOT TARGET ddp_catch_main)
    add_library(ddp_catch_session STATIC ${PROJECT_SOURCE_DIR}/tests/support/catch_session.cpp)
    target_link_libraries(ddp_catch_session PUBLIC Catch2::Catch2)
    target_include_directories(ddp_catch_session PRIVATE ${PROJECT_SOURCE_DIR})
    add_library(ddp_catch_main STATIC ${PROJECT_SOURCE_DIR}/tests/support/catch_main.cpp)
    target_link_libraries(ddp_catch_main PUBLIC ddp_catch_session)
    target_include_directories(ddp_catch_main PRIVATE ${PROJECT_SOURCE_DIR})
    add_library(ddp_catch_cuda_main STATIC ${PROJECT_SOURCE_DIR}/tests/support/cuda_main.cpp)
    target_link_libraries(ddp_catch_cuda_main PUBLIC ddp_catch_session ddp::tensor)
    target_include_directories(ddp_catch_cuda_main PRIVATE ${PROJECT_SOURCE_DIR})
  endif()
endfunction()

function(ddp_add_test)
  ddp_add_catch_mains()
  cmake_parse_arguments(T "CUDA" "NAME;CHAPTER;LAYER;TIMEOUT" "SOURCES;LIBS;DEFINITIONS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set(main ddp_catch_main)
  if(T_CUDA)
    set(main ddp_catch_cuda_main)
  endif()
  ddp_test_timeout(T_TIMEOUT ${T_TIMEOUT})
  # A program that checks an exercise is built from an object library, which its stub
  # twins link too (Note [How an exercise replaces the reference], DdpExercises.cmake).
  ddp_is_exercise_program(checks_exercise ${T_NAME})
  if(checks_exercise)
    add_library(${T_NAME}.objects OBJECT ${T_SOURCES})
    target_link_libraries(${T_NAME}.objects PRIVATE Catch2::Catch2 ${T_LIBS})
    target_include_directories(${T_NAME}.objects PRIVATE ${PROJECT_SOURCE_DIR})
    target_compile_options(${T_NAME}.objects PRIVATE -UNDEBUG)
    target_compile_definitions(${T_NAME}.objects PRIVATE ${T_DEFINITIONS})
    ddp_set_warnings(${T_NAME}.objects)
    add_executable(${T_NAME} $<TARGET_OBJECTS:${T_NAME}.objects>)
    ddp_exercise_test_twins(${T_NAME} ${T_NAME}.objects ${T_TIMEOUT}
                            ${main} ${T_LIBS})
  else()
    add_executable(${T_NAME} ${T_SOURCES})
    target_compile_definitions(${T_NAME} PRIVATE ${T_DEFINITIONS})
  endif()
  target_link_libraries(${T_NAME} PRIVATE ${main})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${T_NAME} PRIVATE -UNDEBUG)
  ddp_set_warnings(${T_NAME})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # The prefix travels to the discovery script as `cmake -D TEST_PREFIX=...`, which
  # strips a trailing space but also one pair of enclosing single quotes: the quotes
  # keep the space after the colon.
  catch_discover_tests(${T_NAME}
    TEST_PREFIX "'${T_CHAPTER}.${T_LAYER}: '"
    PROPERTIES TIMEOUT ${T_TIMEOUT}
               SKIP_RETURN_CODE ${DDP_SKIP_RETURN_CODE})
  # Labels (and the sanitizers' environment) are lists, and catch_discover_tests
  # flattens list-valued PROPERTIES (the second label would become a property name). So
  # they are set by a second script that ctest reads after the discovered tests: it sets
  # them on every name in <target>_TESTS.
  set(labels_script ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_labels.cmake)
  file(WRITE ${labels_script}
    "if(${T_NAME}_TESTS)\n"
    "  set_tests_properties(\${${T_NAME}_TESTS} PROPERTIES LABELS \"${T_CHAPTER};${T_LAYER}\"\n"
    "                       ENVIRONMENT \"${DDP_SANITIZER_ENV}\")\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_script})
endfunction()

# ddp_add_test_program(<name> SOURCES <files...> LIBS <libraries...>): a program that tests
# start as a user would (under ddprun or mpirun, from a script), built into build/tests
# with assert() on and the project's warnings, like the Catch2 tests.
function(ddp_add_test_program name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${P_SOURCES})
  target_link_libraries(${name} PRIVATE ${P_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE -UNDEBUG)
  ddp_set_warnings(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
endfunction()

# ddp_add_process_test(<name> <labels> <timeout> COMMAND...): a test that starts processes
# as a user does (ddprun, mpirun, a script), in DDP_PROCESS_ENV.
function(ddp_add_process_test name labels timeout)
  ddp_test_timeout(timeout ${timeout})
  set(env ${DDP_PROCESS_ENV})
  if("${ARGN}" MATCHES "mpirun|mpiexec")  # MPIEXEC_EXECUTABLE is one of the two
    list(APPEND env ${DDP_SANITIZER_MPI_ENV})  # after DDP_PROCESS_ENV: it wins
  endif()
  add_test(NAME "${name}" COMMAND ${ARGN})
  set_tests_properties("${name}" PROPERTIES LABELS "${labels}" TIMEOUT ${timeout}
                       ENVIRONMENT "${env}")
endfunction()
