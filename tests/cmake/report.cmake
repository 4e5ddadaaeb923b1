# Metrics, statistics and `genemask report`: peers are scikit-learn and SciPy
# (tests/cli/test_metrics_peers.py through the test-only bridge metrics_tool) and an
# independent numpy/scipy computation of the report's tables (tests/cli/test_report.py).
add_executable(metrics_tool tools/metrics_tool.cpp)
target_link_libraries(metrics_tool PRIVATE genemask_core nlohmann_json::nlohmann_json genemask_warnings)

add_test(NAME cli_metrics_peers COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_metrics_peers.py)
set_tests_properties(cli_metrics_peers PROPERTIES TIMEOUT 600
  ENVIRONMENT "METRICS_TOOL=$<TARGET_FILE:metrics_tool>;PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli")

add_test(NAME cli_report_tests COMMAND ${GENEMASK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_report.py)
set_tests_properties(cli_report_tests PROPERTIES TIMEOUT 600
  ENVIRONMENT "GENEMASK_BIN=$<TARGET_FILE:genemask>;PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/cli")
