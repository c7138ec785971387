# For a CMake tree devdl is added to without editing it: every target that sets
# CUDA_SEPARABLE_COMPILATION ON has its device code linked by libdevdl as it loads, instead of by
# nvcc -dlink at build time (devdl_cuda_link_at_load_all, DeviceImages.cmake).
#   cmake -S TREE -B BUILD -DCMAKE_PROJECT_INCLUDE=<devdl_DIR>/devdlCudaLinkAtLoad.cmake
# CMake includes it after each project(); a project() that does not enable CUDA is left alone.
if(NOT TARGET devdl::devdl)
  find_package(devdl REQUIRED CONFIG PATHS ${CMAKE_CURRENT_LIST_DIR} NO_DEFAULT_PATH)
endif()
get_property(_devdl_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if("CUDA" IN_LIST _devdl_languages)
  devdl_cuda_link_at_load_all()
endif()
