# pip install's build switches (docs/install.md), read from the environment
# in Horovod's style: PLAIT_WITH_<X>=1 (must be built: the install fails
# naming what is missing), PLAIT_WITHOUT_<X>=1 (left out), neither (built when
# found). HOROVOD_WITH_<X>/HOROVOD_WITHOUT_<X> are read as aliases. X:
# TENSORFLOW, MXNET, PYTORCH, GLOO, OFI, NCCL. Included by the top
# CMakeLists.txt when scikit-build-core drives the build (SKBUILD); what it
# decides is checked and reported by cmake/pip_report.cmake.

# PLAIT_PIP_<X>: WITH, WITHOUT or AUTO; PLAIT_PIP_<X>_BY: the variable that said so.
function(plait_pip_switch name)
  set(mode AUTO)
  set(by "")
  foreach(prefix PLAIT HOROVOD)
    foreach(kind WITH WITHOUT)
      set(var ${prefix}_${kind}_${name})
      if(DEFINED ENV{${var}} AND NOT "$ENV{${var}}" STREQUAL "" AND NOT "$ENV{${var}}" STREQUAL "0")
        if(NOT mode STREQUAL AUTO AND NOT mode STREQUAL kind)
          message(FATAL_ERROR "plait: ${by}=1 and ${var}=$ENV{${var}} contradict each other: "
            "set one of them")
        endif()
        set(mode ${kind})
        set(by ${var})
      endif()
    endforeach()
  endforeach()
  set(PLAIT_PIP_${name} ${mode} PARENT_SCOPE)
  set(PLAIT_PIP_${name}_BY "${by}" PARENT_SCOPE)
endfunction()

# One line of the build report (printed and shipped as plait/build_info.txt):
# component, yes/no, detail.
function(plait_pip_report component built detail)
  set_property(GLOBAL APPEND_STRING PROPERTY PLAIT_PIP_REPORT "${component}\t${built}\t${detail}\n")
endfunction()

foreach(x TENSORFLOW MXNET PYTORCH GLOO OFI NCCL MPI)
  plait_pip_switch(${x})
endforeach()
if(PLAIT_PIP_MPI STREQUAL WITH)
  message(FATAL_ERROR "plait: ${PLAIT_PIP_MPI_BY}=1 cannot be honoured: plait has no MPI "
    "controller (its own TCP control plane and the Gloo/libfabric/NCCL transports replace it); "
    "unset ${PLAIT_PIP_MPI_BY}")
elseif(PLAIT_PIP_MPI STREQUAL WITHOUT)
  plait_pip_report(MPI no "${PLAIT_PIP_MPI_BY}=1 noted: plait never uses MPI")
endif()

# Missing Debian packages of the core, named before the core's own
# find_package stops with CMake's generic message.
find_package(OpenSSL QUIET COMPONENTS Crypto)
if(NOT OpenSSL_FOUND)
  message(FATAL_ERROR "plait: OpenSSL's libcrypto headers not found: apt-get install libssl-dev")
endif()

# The frameworks are probed with the Python that runs the install (pip's
# isolated build environment puts an overlay on PYTHONPATH that hides the
# target environment's site-packages: dropped for the probes and the
# adapters' own checks).
if(DEFINED Python_EXECUTABLE)
  set(PLAIT_PIP_PYTHON ${Python_EXECUTABLE})
else()
  find_package(Python COMPONENTS Interpreter REQUIRED)
  set(PLAIT_PIP_PYTHON ${Python_EXECUTABLE})
endif()
unset(ENV{PYTHONPATH})
unset(ENV{PYTHONNOUSERSITE})

# Probes module with PLAIT_PIP_PYTHON: out = "<version>" or "" (then out_err says why).
function(plait_pip_probe module out out_err)
  execute_process(COMMAND ${PLAIT_PIP_PYTHON} -c
    "import os, sys\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\ntry:\n    import ${module} as m\nexcept Exception as e:\n    print('MISSING ' + type(e).__name__ + ': ' + str(e).splitlines()[0] if str(e) else type(e).__name__)\n    sys.exit(0)\nprint(m.__version__.split('+')[0])"
    RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX REPLACE ".*\n" "" text "${text}") # the last line: the import's own output goes first
  if(NOT rc EQUAL 0)
    set(${out} "" PARENT_SCOPE)
    string(REGEX REPLACE "\n$" "" err "${err}")
    string(REGEX REPLACE ".*\n" "" err "${err}")
    set(${out_err} "importing ${module} crashed (${rc}): ${err}" PARENT_SCOPE)
  elseif(text MATCHES "^MISSING (.*)")
    set(${out} "" PARENT_SCOPE)
    set(${out_err} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "${text}" PARENT_SCOPE)
  endif()
endfunction()

# A framework: X, its module, its display name, the supported range
# [low, high), the tested version, the pip requirement to fix it, the cache
# variable that builds its adapter ("" for PyTorch: pure Python).
function(plait_pip_framework x module display low high tested fix cache_var)
  set(mode ${PLAIT_PIP_${x}})
  set(by ${PLAIT_PIP_${x}_BY})
  if(cache_var)
    set(${cache_var} "" CACHE STRING "" FORCE)
  endif()
  if(mode STREQUAL WITHOUT)
    plait_pip_report(${display} no "left out (${by}=1)")
    return()
  endif()
  plait_pip_probe(${module} version why)
  if(NOT version)
    if(mode STREQUAL WITH)
      message(FATAL_ERROR "plait: ${by}=1 but ${PLAIT_PIP_PYTHON} cannot import ${module} "
        "(${why}): install it into this environment first (pip install '${fix}'), "
        "or unset ${by}")
    endif()
    plait_pip_report(${display} no "${module} not importable by ${PLAIT_PIP_PYTHON} (${why})")
    return()
  endif()
  if(version VERSION_LESS low OR NOT version VERSION_LESS high)
    message(FATAL_ERROR "plait: ${display} ${version} (${PLAIT_PIP_PYTHON}) is not supported: "
      "plait needs ${display} >= ${low} and < ${high} (tested: ${tested}); pip install '${fix}', "
      "or set PLAIT_WITHOUT_${x}=1 to install without it")
  endif()
  if(cache_var)
    set(${cache_var} ${PLAIT_PIP_PYTHON} CACHE STRING "" FORCE)
  endif()
  set(PLAIT_PIP_${x}_VERSION ${version} PARENT_SCOPE)
  set_property(GLOBAL PROPERTY PLAIT_PIP_${x}_VERSION ${version})
endfunction()

plait_pip_framework(TENSORFLOW tensorflow TensorFlow 2.12 2.22 2.21.0
  "tensorflow-cpu==2.21.0" PLAIT_TF_PYTHON)
plait_pip_framework(MXNET mxnet MXNet 1.6 2.0 1.9.1 "mxnet==1.9.1" PLAIT_MXNET_PYTHON)
plait_pip_framework(PYTORCH torch PyTorch 1.13 3 "1.13 (Debian) and 2.x" "torch>=2,<3" "")

# The transports: PLAIT_SKIP_<X> keeps plugins/CMakeLists.txt from adding them.
foreach(x GLOO OFI NCCL)
  set(PLAIT_SKIP_${x} OFF)
  if(PLAIT_PIP_${x} STREQUAL WITHOUT)
    set(PLAIT_SKIP_${x} ON)
  endif()
endforeach()
