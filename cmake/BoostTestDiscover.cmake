# Registers each Boost.Test case of an executable as its own CTest test, so ctest counts and
# reports cases rather than binaries. The list is read after each build (--list_content).
# boost_test_discover(target [LABEL label]) gives every case of the target that CTest label.
function(boost_test_discover target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "LABEL" "")
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D EXE=$<TARGET_FILE:${target}> -D OUT=${out} -D PREFIX=${target}.
            -D LABEL=${arg_LABEL}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/BoostTestDiscoverScript.cmake
    BYPRODUCTS ${out} VERBATIM)
  # A tree that builds only some targets (the TSan stage of .ci/run) can still run ctest -R; a
  # target not built shows as one failing test, <target>.not_built, never as no tests at all.
  set(guard "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests_if_built.cmake")
  file(WRITE ${guard} "if(EXISTS [==[${out}]==])\n  include([==[${out}]==])\nelse()\n"
       "  add_test([==[${target}.not_built]==] [==[${CMAKE_COMMAND}]==] -E false)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${guard})
endfunction()
