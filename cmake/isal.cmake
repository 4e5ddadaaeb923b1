# ISA-L inflate (gzip/BGZF reading runs ~3x faster than with zlib's): the interface target
# genemask_isal, for the main build and for the Python package's (python/CMakeLists.txt).
find_path(ISAL_INCLUDE_DIR isa-l/igzip_lib.h)
find_library(ISAL_LIBRARY isal)
if(NOT ISAL_INCLUDE_DIR OR NOT ISAL_LIBRARY)
  message(FATAL_ERROR "ISA-L not found: install libisal-dev (scripts/install-deps.sh)")
endif()
add_library(genemask_isal INTERFACE)
target_include_directories(genemask_isal SYSTEM INTERFACE ${ISAL_INCLUDE_DIR})
target_link_libraries(genemask_isal INTERFACE ${ISAL_LIBRARY})
