# Warning and sanitizer flags for project code. Third-party headers are
# included as SYSTEM so their warnings never fail our build.

set(TESSERA_SANITIZER_FLAGS "")
if(TESSERA_ASAN)
  list(APPEND TESSERA_SANITIZER_FLAGS -fsanitize=address -fno-omit-frame-pointer)
endif()
if(TESSERA_UBSAN)
  list(APPEND TESSERA_SANITIZER_FLAGS -fsanitize=undefined -fno-sanitize-recover=undefined)
endif()
if(TESSERA_TSAN)
  if(TESSERA_ASAN)
    message(FATAL_ERROR "TESSERA_TSAN and TESSERA_ASAN cannot be combined")
  endif()
  list(APPEND TESSERA_SANITIZER_FLAGS -fsanitize=thread)
endif()
if(TESSERA_SANITIZER_FLAGS)
  add_compile_options(${TESSERA_SANITIZER_FLAGS})
  add_link_options(${TESSERA_SANITIZER_FLAGS})
endif()

if(TESSERA_THREAD_SAFETY AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TESSERA_THREAD_SAFETY needs clang (-Wthread-safety); "
                      "this compiler is ${CMAKE_CXX_COMPILER_ID}")
endif()

# tessera_target_defaults(<target>): include root, warnings, C++20, and with
# TESSERA_THREAD_SAFETY the lock annotations checked (errors even without
# TESSERA_WERROR: a broken lock rule is a bug, not a style note).
function(tessera_target_defaults target)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
                         -Wno-unused-parameter -Wno-missing-field-initializers)
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(TESSERA_THREAD_SAFETY)
    target_compile_options(${target} PRIVATE -Wthread-safety -Werror=thread-safety)
  endif()
endfunction()
