# Issue 6, `genemask dataset splice`: tests/io/annotation_exons_test.cpp (io_tests) and
# tests/core/tasks/splice_test.cpp (core_tests) are globbed; the command end to end against an
# independent Python implementation of the site rules:
add_test(NAME cli_dataset_splice_tests COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_dataset_splice.py)
set_tests_properties(cli_dataset_splice_tests PROPERTIES TIMEOUT 600
  ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;MPIEXEC=${MPIEXEC_EXECUTABLE};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli")
