# Issue 6, `genemask dataset promoter|enhancer` and the common writer. Unit tests
# (tests/core/{task_dataset,promoter,enhancer}_test.cpp, tests/io/bed_test.cpp) are globbed
# into core_tests / io_tests; here the command end to end, checked by Python.
add_test(NAME cli_dataset_tests COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_dataset.py
         PromoterTest EnhancerTest)
set_tests_properties(cli_dataset_tests PROPERTIES TIMEOUT 600
  ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;MPIEXEC=${MPIEXEC_EXECUTABLE};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli")
# `genemask finetune` on a built dataset needs libgenemask_model.so.
if(GENEMASK_WITH_TORCH)
  add_test(NAME cli_dataset_finetune_tests COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_dataset.py
           FinetuneOnDataset)
  set_tests_properties(cli_dataset_finetune_tests PROPERTIES TIMEOUT 600
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;MPIEXEC=${MPIEXEC_EXECUTABLE};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli")
endif()
