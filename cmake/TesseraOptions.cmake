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

# tessera_target_defaults(<target>): include root, warnings, C++20.
function(tessera_target_defaults target)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
                         -Wno-unused-parameter -Wno-missing-field-initializers)
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
