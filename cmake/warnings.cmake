# Warnings for our own code, as an INTERFACE target every project target links PRIVATE
# (`target_link_libraries(x PRIVATE mmfeed_warnings)`): PRIVATE, so the flags never reach a
# user of the libraries. Third-party headers do not trip them: the Debian packages' imported
# targets are SYSTEM includes already, nanobind is added with NB_SUPPRESS_WARNINGS.
#
# MMFEED_WERROR turns every warning into an error (`make test` with MMFEED_WERROR=1 in the
# environment).
option(MMFEED_WERROR "Treat compiler warnings in mmfeed's own code as errors" OFF)

add_library(mmfeed_warnings INTERFACE)
target_compile_options(mmfeed_warnings INTERFACE -Wall -Wextra -Wshadow -Wconversion)
# GCC 12's libstdc++ trips its own -Wrestrict on `"literal" + std::string&&` once inlined into our
# code (char_traits.h: "__builtin_memcpy accessing 9223372036854775810 or more bytes", GCC
# PR 105329), a false positive no code of ours can avoid but by rewriting correct concatenations.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(mmfeed_warnings INTERFACE -Wno-restrict)
endif()
if(MMFEED_WERROR)
  target_compile_options(mmfeed_warnings INTERFACE -Werror)
endif()
