# Issue 6 analyses: `genemask overlap` and `genemask variants`. Unit tests
# (tests/core/kmer/overlap_test.cpp, tests/io/vcf_test.cpp) are globbed into core_tests/io_tests.
add_test(NAME cli_overlap_tests COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_overlap.py)
set_tests_properties(cli_overlap_tests PROPERTIES TIMEOUT 600
  ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;MPIEXEC=${MPIEXEC_EXECUTABLE};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli")
if(GENEMASK_WITH_TORCH)
  add_test(NAME cli_variants_tests COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_variants.py)
  set_tests_properties(cli_variants_tests PROPERTIES TIMEOUT 900
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;MPIEXEC=${MPIEXEC_EXECUTABLE};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli:${CMAKE_CURRENT_SOURCE_DIR}/model")
endif()
