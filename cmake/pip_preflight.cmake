# pip install only (SKBUILD), before project(): a missing compiler named with
# the Debian package to install (CMake's own message names none). CC and CXX,
# when set, must name a compiler that exists.
foreach(entry "C;CC;cc gcc clang;gcc" "C++;CXX;c++ g++ clang++;g++")
  list(GET entry 0 lang)
  list(GET entry 1 var)
  list(GET entry 2 names)
  list(GET entry 3 package)
  string(REPLACE " " ";" names "${names}")
  if(DEFINED ENV{${var}} AND NOT "$ENV{${var}}" STREQUAL "")
    separate_arguments(cmd UNIX_COMMAND "$ENV{${var}}")
    list(GET cmd 0 tool)
    find_program(plait_pip_${var} NAMES ${tool} NO_CACHE)
    if(NOT plait_pip_${var})
      message(FATAL_ERROR "plait: ${var}=$ENV{${var}} names no ${lang} compiler that exists: "
        "apt-get install ${package}, or unset ${var}")
    endif()
  else()
    find_program(plait_pip_${var} NAMES ${names} NO_CACHE)
    if(NOT plait_pip_${var})
      message(FATAL_ERROR "plait: no ${lang} compiler found (${names} on PATH, or ${var}): "
        "apt-get install ${package}")
    endif()
  endif()
endforeach()
