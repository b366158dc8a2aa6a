# The exercise mode (tutorial/EXERCISES.md): a participant writes a function of the library
# and the chapter's own tests judge it.
#
#   cmake --preset exercises            # = -DDDP_EXERCISES=started
#   -DDDP_EXERCISES=started|all|ch05|05.2|"ch05;06.1"
#
# Note [How an exercise replaces the reference]
# ---------------------------------------------
# Each exercise is one source file of a library that holds exactly the exercise's
# functions (dist/plain_ring.cpp). Two ways put another version of it in a program:
#  * The exercise build compiles the participant's copy (tutorial/<chapter>/mine/<file>,
#    or the stub under tutorial/<chapter>/exercises/ for an exercise selected but not
#    started) into the library in place of the reference file. Every caller, the
#    library's own code included, then runs the participant's code.
#  * The default build proves that the tests can tell a stub from the reference, without
#    building the libraries twice: a copy of the exercise's test program is linked with
#    the stub's object file. A static library is an archive of object files, and the
#    linker takes a member of an archive only to define a symbol that is still missing,
#    while an object file named on the command line is always linked. The stub defines
#    the exercise's functions first, so the archive's member with the reference is never
#    taken (were it needed for another symbol, the link would fail with "multiple
#    definition": that is why the file holds the exercise's functions and nothing else).
include_guard(GLOBAL)

set(DDP_EXERCISES "" CACHE STRING
    "Exercises built from your copy (tutorial/EXERCISES.md): started, all, ch05, 05.2, ...")
set(DDP_EXERCISE_TABLE ${PROJECT_SOURCE_DIR}/tutorial/EXERCISES.md)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${DDP_EXERCISE_TABLE})

# The table's rows: "| 05.2 | ch05_rendezvous | ... | dist/plain_ring.cpp | test_ch05_tcp_pg |".
# Sets DDP_EXERCISE_IDS and, per id, DDP_EXERCISE_<id>_{CHAPTER,FILE,PROGRAM,STUB,MINE}.
file(STRINGS ${DDP_EXERCISE_TABLE} _ddp_rows REGEX "^\\| [0-9][0-9]\\.[0-9] ")
set(DDP_EXERCISE_IDS "")
foreach(row IN LISTS _ddp_rows)
  string(REGEX REPLACE "^\\|(.*)\\|$" "\\1" row "${row}")
  string(REPLACE "|" ";" cells "${row}")
  list(LENGTH cells n)
  if(NOT n EQUAL 5)
    message(FATAL_ERROR "${DDP_EXERCISE_TABLE}: a row of the table has ${n} cells, "
                        "expected 5 (id, chapter, you write, file, checked by): ${row}")
  endif()
  list(TRANSFORM cells STRIP)
  list(GET cells 0 id)
  list(GET cells 1 chapter)
  list(GET cells 3 file)
  list(GET cells 4 program)
  get_filename_component(name ${file} NAME)
  foreach(path IN ITEMS ${PROJECT_SOURCE_DIR}/${file}
                        ${PROJECT_SOURCE_DIR}/tutorial/${chapter}/exercises/${name})
    if(NOT EXISTS ${path})
      message(FATAL_ERROR "${DDP_EXERCISE_TABLE}: exercise ${id}: ${path} does not exist")
    endif()
  endforeach()
  list(APPEND DDP_EXERCISE_IDS ${id})
  set(DDP_EXERCISE_${id}_CHAPTER ${chapter})
  set(DDP_EXERCISE_${id}_FILE ${PROJECT_SOURCE_DIR}/${file})
  set(DDP_EXERCISE_${id}_PROGRAM ${program})
  set(DDP_EXERCISE_${id}_STUB ${PROJECT_SOURCE_DIR}/tutorial/${chapter}/exercises/${name})
  set(DDP_EXERCISE_${id}_MINE ${PROJECT_SOURCE_DIR}/tutorial/${chapter}/mine/${name})
endforeach()

# The pointer message of an exercise's stub, as a regular expression.
function(ddp_exercise_pointer out id)
  string(REGEX MATCH "[0-9]+$" number ${id})
  set(page "tutorial/${DDP_EXERCISE_${id}_CHAPTER}/README\\.md")
  set(${out} "exercise ${id} is not done yet: see ${page}#exercise-${number}" PARENT_SCOPE)
endfunction()

# ddp_exercise_test_twins(<program> <objects> <timeout> <libs...>): ddp_add_test calls it
# for every test program named in the table's "checked by" column (<objects>: the object
# library it is built from). Registers "chNN.exNN.M: ..." (the tagged cases on the
# reference, labels chNN, exNN.M, exercises) and a copy of the program linked with the
# exercise's stub (the second way of Note [How an exercise replaces the reference]),
# whose tagged cases must fail with the stub's pointer.
function(ddp_exercise_test_twins program objects timeout)
  foreach(id IN LISTS DDP_EXERCISE_IDS)
    if(NOT DDP_EXERCISE_${id}_PROGRAM STREQUAL program)
      continue()
    endif()
    string(REGEX MATCH "^[0-9]+" chapter_number ${id})
    set(chapter ch${chapter_number})
    add_test(NAME "${chapter}.ex${id}: the exercise's tests pass"
             COMMAND ${program} "[ex${id}]")
    set_tests_properties("${chapter}.ex${id}: the exercise's tests pass"
      PROPERTIES LABELS "${chapter};ex${id};exercises" TIMEOUT ${timeout}
                 ENVIRONMENT "${DDP_SANITIZER_ENV}")
    # The twin: the same test objects, the stub, the same libraries.
    set(twin ${program}.stub-${id})
    add_executable(${twin} $<TARGET_OBJECTS:${objects}> ${DDP_EXERCISE_${id}_STUB})
    target_link_libraries(${twin} PRIVATE ${ARGN})
    target_include_directories(${twin} PRIVATE ${PROJECT_SOURCE_DIR})
    ddp_set_warnings(${twin})
    set_target_properties(${twin} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
    ddp_exercise_pointer(pointer ${id})
    set(name "${chapter}.ex${id}: the untouched stub fails every one of the exercise's tests")
    add_test(NAME "${name}" COMMAND bash ${PROJECT_SOURCE_DIR}/tests/exercises/stub_fails.sh
                                     $<TARGET_FILE:${twin}> ${id} "${pointer}")
    set_tests_properties("${name}" PROPERTIES LABELS "${chapter};exercises"
      TIMEOUT ${timeout} ENVIRONMENT "${DDP_SANITIZER_ENV}")
  endforeach()
endfunction()

# Whether a test program checks an exercise (it is then built as objects + executable).
function(ddp_is_exercise_program out program)
  set(found FALSE)
  foreach(id IN LISTS DDP_EXERCISE_IDS)
    if(DDP_EXERCISE_${id}_PROGRAM STREQUAL program)
      set(found TRUE)
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# ddp_swap_in_exercises(<library targets...>): the first way of the Note, for the
# exercises DDP_EXERCISES selects. Called once every library exists.
function(ddp_swap_in_exercises)
  if(DDP_EXERCISES STREQUAL "")
    return()
  endif()
  # A copy started (or deleted) after this configure must reconfigure the build.
  file(GLOB mine_copies CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tutorial/*/mine/*.cpp)
  set(chosen "")
  foreach(id IN LISTS DDP_EXERCISE_IDS)
    string(REGEX MATCH "^[0-9]+" chapter_number ${id})
    if(("started" IN_LIST DDP_EXERCISES AND EXISTS ${DDP_EXERCISE_${id}_MINE})
       OR "all" IN_LIST DDP_EXERCISES OR "${id}" IN_LIST DDP_EXERCISES
       OR "ch${chapter_number}" IN_LIST DDP_EXERCISES)
      list(APPEND chosen ${id})
    endif()
  endforeach()
  foreach(word IN LISTS DDP_EXERCISES)
    if(NOT word MATCHES "^(started|all|ch[0-9][0-9]|[0-9][0-9]\\.[0-9])$")
      message(FATAL_ERROR "DDP_EXERCISES: '${word}' is not started, all, a chapter (ch05) "
                          "or an exercise id (05.2): see tutorial/EXERCISES.md")
    endif()
  endforeach()
  foreach(id IN LISTS chosen)
    set(reference ${DDP_EXERCISE_${id}_FILE})
    if(EXISTS ${DDP_EXERCISE_${id}_MINE})
      set(yours ${DDP_EXERCISE_${id}_MINE})
    else()
      set(yours ${DDP_EXERCISE_${id}_STUB})
    endif()
    set(swapped FALSE)
    foreach(library IN LISTS ARGN)
      get_target_property(sources ${library} SOURCES)
      get_target_property(dir ${library} SOURCE_DIR)
      set(new_sources "")
      foreach(source IN LISTS sources)
        get_filename_component(absolute ${source} ABSOLUTE BASE_DIR ${dir})
        if(absolute STREQUAL reference)
          list(APPEND new_sources ${yours})
          set(swapped TRUE)
        else()
          list(APPEND new_sources ${source})  # as listed: relative to the library's folder
        endif()
      endforeach()
      set_property(TARGET ${library} PROPERTY SOURCES ${new_sources})
    endforeach()
    if(NOT swapped)
      message(FATAL_ERROR "exercise ${id}: no library is built from ${reference}")
    endif()
    file(RELATIVE_PATH shown ${PROJECT_SOURCE_DIR} ${yours})
    message(STATUS "exercise ${id}: ${shown}")
  endforeach()
  if(NOT chosen)
    message(STATUS "exercises: none selected by DDP_EXERCISES=${DDP_EXERCISES} "
                   "(tools/exercise start ID begins one)")
  endif()
endfunction()
