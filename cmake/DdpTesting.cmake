# ddp_add_test(): one Catch2 executable per chapter and layer, each test case of it
# registered with ctest as "<chapter>.<layer>: <test case>" under the labels `chNN` and
# `<layer>`, so that `ctest -L ch01` runs exactly what chapter 01 promises.
#
#   ddp_add_test(NAME test_ch01_tensor CHAPTER ch01 LAYER tensor
#                SOURCES a.cpp b.cpp LIBS ddp::tensor [CUDA] [TIMEOUT 60])
#
# CUDA marks a test that needs a GPU: its main() (tests/support/cuda_main.cpp) exits
# with code 77 when no GPU is usable, and ctest reports that as "Skipped", never as
# a pass. Tests are always built with assert() on (NDEBUG removed), whatever the preset.
include_guard(GLOBAL)
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


function(ddp_add_test)
  cmake_parse_arguments(T "CUDA" "NAME;CHAPTER;LAYER;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  if(T_CUDA)
    target_sources(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support/cuda_main.cpp)
    target_link_libraries(${T_NAME} PRIVATE Catch2::Catch2)
  else()
    target_link_libraries(${T_NAME} PRIVATE Catch2::Catch2WithMain)
  endif()
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
  # Labels are a list, and catch_discover_tests flattens list-valued PROPERTIES (the
  # second label would become a property name). So they are set by a second script that
  # ctest reads after the discovered tests: it labels every name in <target>_TESTS.
  set(labels_script ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_labels.cmake)
  file(WRITE ${labels_script}
    "if(${T_NAME}_TESTS)\n"
    "  set_tests_properties(\${${T_NAME}_TESTS} PROPERTIES LABELS \"${T_CHAPTER};${T_LAYER}\")\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_script})
endfunction()

# ddp_add_process_test(<name> <labels> <timeout> COMMAND...): a test that starts processes
# as a user does (ddprun, mpirun, a script), in DDP_PROCESS_ENV.
function(ddp_add_process_test name labels timeout)
  add_test(NAME "${name}" COMMAND ${ARGN})
  set_tests_properties("${name}" PROPERTIES LABELS "${labels}" TIMEOUT ${timeout}
                       ENVIRONMENT "${DDP_PROCESS_ENV}")
endfunction()
