# Stage 4, `genemask finetune`: the classifier against PyTorch references (gtest) and the
# command end to end (Python). tests/core/tasks/fewshot_test.cpp is part of core_tests.
if(GENEMASK_WITH_TORCH)
  add_executable(classifier_tests ${CMAKE_CURRENT_SOURCE_DIR}/model/classifier_test.cpp)
  target_link_libraries(classifier_tests PRIVATE genemask_test_util genemask_model GTest::gtest_main)
  target_compile_definitions(classifier_tests PRIVATE GENEMASK_TEST_SOURCE="${CMAKE_CURRENT_SOURCE_DIR}"
                             GENEMASK_TEST_PYTHON="${GENEMASK_PYTHON}")
  target_compile_options(classifier_tests PRIVATE -Wno-conversion)
  gtest_discover_tests(classifier_tests PROPERTIES TIMEOUT 300 DISCOVERY_TIMEOUT 60)

  add_test(NAME cli_finetune_tests COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_finetune.py)
  set_tests_properties(cli_finetune_tests PROPERTIES TIMEOUT 900
    ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;MPIEXEC=${MPIEXEC_EXECUTABLE};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli")
endif()
