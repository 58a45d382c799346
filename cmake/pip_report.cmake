# After every target is defined (pip install only, SKBUILD): a WITH switch
# whose target was not built fails the install naming the Debian package
# (cmake/pip_switches.cmake read the switches); the build report is printed
# and installed as plait/build_info.txt (read by python -m plait.info); and
# forwarders in the environment's lib/cmake and lib/pkgconfig point at the
# CMake package and pkg-config file inside site-packages/plait.

# A transport: X, its target, its name, the Debian package(s) that provide it.
function(plait_pip_transport x target name fix)
  set(by ${PLAIT_PIP_${x}_BY})
  if(PLAIT_PIP_${x} STREQUAL WITHOUT)
    plait_pip_report(${name} no "left out (${by}=1)")
  elseif(TARGET ${target})
    plait_pip_report(${name} yes "${CMAKE_INSTALL_LIBDIR}/lib${target}.so")
  elseif(PLAIT_PIP_${x} STREQUAL WITH)
    message(FATAL_ERROR "plait: ${by}=1 but the ${name} transport cannot be built: ${fix}")
  else()
    plait_pip_report(${name} no "not found: ${fix}")
  endif()
endfunction()

get_property(nccl_why GLOBAL PROPERTY PLAIT_NCCL_SKIPPED)
plait_pip_transport(GLOO plait-transport-gloo Gloo
  "libgloo-dev not found: apt-get install libgloo-dev")
plait_pip_transport(OFI plait-transport-ofi libfabric
  "libfabric-dev not found: apt-get install libfabric-dev")
plait_pip_transport(NCCL plait-transport-nccl NCCL
  "${nccl_why} (Debian: apt-get install nvidia-cuda-toolkit libnccl-dev)")

# A framework adapter the probe found must have been built.
foreach(entry "TENSORFLOW;plait_tensorflow;TensorFlow" "MXNET;plait_mxnet;MXNet")
  list(GET entry 0 x)
  list(GET entry 1 target)
  list(GET entry 2 name)
  get_property(version GLOBAL PROPERTY PLAIT_PIP_${x}_VERSION)
  if(NOT version)
    continue() # left out or not importable: reported by pip_switches.cmake
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "plait: ${name} ${version} is importable but its adapter was not "
      "built (see the messages above); set PLAIT_WITHOUT_${x}=1 to install without it")
  endif()
  plait_pip_report(${name} yes "${name} ${version}: ${CMAKE_INSTALL_LIBDIR}/lib${target}.so")
endforeach()
get_property(torch_version GLOBAL PROPERTY PLAIT_PIP_PYTORCH_VERSION)
if(torch_version)
  plait_pip_report(PyTorch yes "torch ${torch_version} (plait.torch is pure Python)")
endif()

get_property(report GLOBAL PROPERTY PLAIT_PIP_REPORT)
string(REPLACE "\t" " | " shown "${report}")
message(NOTICE "plait ${PROJECT_VERSION} pip build (component | built | detail):\n${shown}")
file(WRITE ${CMAKE_BINARY_DIR}/build_info.txt
  "# plait ${PROJECT_VERSION}: what pip install built (component, built, detail)\n${report}")
install(FILES ${CMAKE_BINARY_DIR}/build_info.txt DESTINATION .)

# The environment's lib/cmake/plait and lib/pkgconfig/plait.pc forward to the
# ones inside the package: the path from the data folder (the environment's
# prefix) to site-packages, as the installing Python's scheme lays it out.
execute_process(COMMAND ${PLAIT_PIP_PYTHON} -c
  "import os, sysconfig; p = sysconfig.get_paths(vars={'base': '/P', 'platbase': '/P'}); print(os.path.relpath(p['platlib'], p['data']))"
  OUTPUT_VARIABLE data_to_site OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT data_to_site OR NOT DEFINED SKBUILD_DATA_DIR)
  message(FATAL_ERROR "plait: cannot tell where site-packages lies in the environment "
    "(${PLAIT_PIP_PYTHON}: '${data_to_site}')")
endif()
set(pkg_cmake "\${CMAKE_CURRENT_LIST_DIR}/../../../${data_to_site}/plait/${CMAKE_INSTALL_LIBDIR}/cmake/plait")
foreach(f plaitConfig plaitConfigVersion)
  file(WRITE ${CMAKE_BINARY_DIR}/forward/${f}.cmake
    "# Written by plait's pip install: the CMake package lives inside the Python package.\n"
    "include(\"${pkg_cmake}/${f}.cmake\")\n")
  install(FILES ${CMAKE_BINARY_DIR}/forward/${f}.cmake
    DESTINATION ${SKBUILD_DATA_DIR}/lib/cmake/plait)
endforeach()
set(PLAIT_PC_TO_PREFIX "../../${data_to_site}/plait")
configure_file(cmake/plait.pc.in ${CMAKE_BINARY_DIR}/forward/plait.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/forward/plait.pc DESTINATION ${SKBUILD_DATA_DIR}/lib/pkgconfig)
