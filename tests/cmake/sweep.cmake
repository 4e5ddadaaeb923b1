# genemask sweep: its testing aids (serial gtest; the plan and results.jsonl are core's,
# tests/core/eval/), and end-to-end sweeps through the binary at 1, 2 and 4 ranks
# (simulated jobs; real fine-tuning with Torch).
add_executable(sweep_tests hpc/sweep_test.cpp)
target_link_libraries(sweep_tests PRIVATE genemask_test_util genemask_hpc GTest::gtest_main)
gtest_discover_tests(sweep_tests PROPERTIES TIMEOUT 120 DISCOVERY_TIMEOUT 60)

set(_sweep_env "GENEMASK_BIN=$<TARGET_FILE:genemask>;MPIEXEC=${MPIEXEC_EXECUTABLE};PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli"
    "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
add_test(NAME cli_sweep_tests COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_sweep.py)
set_tests_properties(cli_sweep_tests PROPERTIES TIMEOUT 900 ENVIRONMENT "${_sweep_env}")
if(GENEMASK_WITH_TORCH)
  # Real fine-tuning through libgenemask_model.so (next to the binary under test).
  add_test(NAME cli_sweep_finetune_tests
           COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_sweep.py SweepFinetune)
  set_tests_properties(cli_sweep_finetune_tests PROPERTIES TIMEOUT 900 ENVIRONMENT "${_sweep_env}")
endif()
