# Installed, under GNU directories, in four components that CPack makes Debian packages of:
#   runtime  (libdevdl0)       libdevdl.so.0 and its SONAME link, and devdl-translate beside it
#   tools    (devdl-tools)     devdl-nm, devdl-pack, devdl-cache, their manual pages and devdl(7)
#   dev      (libdevdl-dev)    devdl.h, devdl_sycl.h and devdl_cuda.h, the libdevdl.so link, the CMake package (devdl::devdl,
#                              devdl::devdl-pack, the rules of DeviceImages.cmake), devdl.pc,
#                              devdl(3), README, docs/ and bench/README.md
#   python   (python3-devdl)   the Python module (ctypes over libdevdl.so.0)
# A wheel (DEVDL_WHEEL, pyproject.toml) installs the same inside the Python module's folder (its
# directories devdl/lib, devdl/include, devdl/bin), but neither manual pages nor docs, and the
# library as one file: a wheel has no symbolic links, and would carry copies.
include(CMakePackageConfigHelpers)
set(DEVDL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/devdl)
set(DEVDL_PYTHON_DIR lib/python3/dist-packages CACHE PATH "Where the Python module goes, under the prefix")

if(DEVDL_WHEEL)
  install(TARGETS devdl EXPORT devdlTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_SKIP)
else()
  install(TARGETS devdl EXPORT devdlTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
endif()
# Where libdevdl looks for it, from its own directory (backend/spirv/translator_process.h).
if(TARGET devdl-translate)
  install(TARGETS devdl-translate RUNTIME DESTINATION ${CMAKE_INSTALL_LIBDIR}/devdl/libexec COMPONENT runtime)
endif()
install(TARGETS devdl-nm devdl-pack devdl-cache EXPORT devdlTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/include/devdl.h ${PROJECT_SOURCE_DIR}/include/devdl_sycl.h
              ${PROJECT_SOURCE_DIR}/include/devdl_cuda.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT devdlTargets NAMESPACE devdl:: DESTINATION ${DEVDL_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/devdlConfig.cmake.in devdlConfig.cmake
                              INSTALL_DESTINATION ${DEVDL_CMAKE_DIR})
# 0.x: a new minor version may change the ABI.
write_basic_package_version_file(devdlConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/devdlConfig.cmake ${PROJECT_BINARY_DIR}/devdlConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/DeviceImages.cmake ${PROJECT_SOURCE_DIR}/cmake/devdlCudaLinkAtLoad.cmake
        DESTINATION ${DEVDL_CMAKE_DIR} COMPONENT dev)
file(RELATIVE_PATH DEVDL_PC_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/devdl.pc.in devdl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/devdl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
# As in the tree, so that README's links to docs/ (and docs' to man/) hold where it is installed.
if(NOT DEVDL_WHEEL)
  install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev
          FILES_MATCHING PATTERN "*.md" PATTERN "*.scd")
  install(FILES ${PROJECT_SOURCE_DIR}/bench/README.md ${PROJECT_SOURCE_DIR}/bench/HISTORY.md
          DESTINATION ${CMAKE_INSTALL_DOCDIR}/bench COMPONENT dev)

  # The manual pages, from their scdoc sources (docs/man/NAME.SECTION.scd): the C API's with the
  # headers, the rest with the tools.
  find_program(DEVDL_SCDOC scdoc REQUIRED)
  file(GLOB devdl_man_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/*.scd)
  set(devdl_man_pages)
  foreach(source ${devdl_man_sources})
    get_filename_component(page ${source} NAME_WLE)  # devdl-nm.1
    string(REGEX REPLACE ".*\\." "" section ${page})
    set(output ${PROJECT_BINARY_DIR}/man/${page})
    add_custom_command(OUTPUT ${output}
                       COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
                       COMMAND ${DEVDL_SCDOC} < ${source} > ${output}
                       DEPENDS ${source} COMMENT "Writing the manual page ${page}")
    list(APPEND devdl_man_pages ${output})
    set(component tools)
    if(section STREQUAL "3")
      set(component dev)
    endif()
    install(FILES ${output} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${component})
  endforeach()
  add_custom_target(devdl_man_pages ALL DEPENDS ${devdl_man_pages})
endif()

# The Python module, told where the library, the CMake package, the headers and the tools are,
# relative to its own folder, so that the installation can be moved as a whole (a prefix, a
# package unpacked with dpkg -x, a wheel).
set(devdl_installed "# Written by devdl's installation: where its parts are, relative to this folder.\n")
foreach(part "LIBRARY;${CMAKE_INSTALL_LIBDIR}/libdevdl.so.${PROJECT_VERSION_MAJOR}" "CMAKE_DIR;${DEVDL_CMAKE_DIR}"
             "INCLUDE_DIR;${CMAKE_INSTALL_INCLUDEDIR}" "BIN_DIR;${CMAKE_INSTALL_BINDIR}")
  list(GET part 0 name)
  list(GET part 1 path)
  file(RELATIVE_PATH relative /prefix/${DEVDL_PYTHON_DIR}/devdl /prefix/${path})
  string(APPEND devdl_installed "${name} = \"${relative}\"\n")
endforeach()
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/python/_installed.py CONTENT "${devdl_installed}")
file(GLOB devdl_python_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/devdl/*.py)
install(FILES ${devdl_python_files} ${PROJECT_SOURCE_DIR}/python/devdl/py.typed ${PROJECT_BINARY_DIR}/python/_installed.py
        DESTINATION ${DEVDL_PYTHON_DIR}/devdl COMPONENT python)

# Debian packages (scripts/package.sh configures a build for /usr and runs CPack). The
# dependencies of what is linked come from dpkg-shlibdeps; what libdevdl.so.0 loads at run time
# (the OpenCL ICD loader and an ICD, the Level Zero loader, CUDA's driver, hiredis and OpenSSL for a remote cache) is recommended or
# suggested.
set(CPACK_PACKAGE_NAME devdl)
set(CPACK_PACKAGE_VENDOR devdl)
set(CPACK_PACKAGE_CONTACT "devdl developers" CACHE STRING "The Debian packages' Maintainer")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "dlopen for GPU device code")
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime tools dev python)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(version_release "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libdevdl0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "ocl-icd-libopencl1 | libopencl1, pocl-opencl-icd | opencl-icd")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "libze1, libcuda1, libhiredis0.14, libssl3")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "dlopen for GPU device code: the library
 devdl finds device images (SPIR-V, SPIR, cubin, PTX, CUDA fat binaries; loose, in bundles or
 inside host libraries), orders them as the host loader orders libraries, resolves their device
 symbols and links them through OpenCL (loaded at run time) or the CUDA driver.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME devdl-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION devel)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "dlopen for GPU device code: devdl-nm, devdl-pack, devdl-cache
 devdl-nm lists what a device image exports and imports, devdl-pack packs images into bundles and
 host objects, devdl-cache lists and cleans devdl's disk cache.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdevdl-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libdevdl0 (= ${version_release}), devdl-tools (= ${version_release})")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "clang-15, llvm-spirv-15, ocl-icd-opencl-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION "dlopen for GPU device code: development files
 devdl.h, the CMake package (find_package(devdl): devdl::devdl, devdl::devdl-pack and the rules
 that compile OpenCL C and CUDA to device images and embed them into host targets), devdl.pc.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-devdl)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "libdevdl0 (= ${version_release}), python3")
set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS "python3-pyopencl")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "dlopen for GPU device code: Python module
 devdl.open(), kernels as PyOpenCL kernels in devdl's context, CUDA functions as integers.")
include(CPack)
