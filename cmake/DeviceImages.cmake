# Rules that build device images from source with the real compilers, shared by the samples
# and the tests, and installed with devdl's CMake package for projects that use it.
find_program(DEVDL_CLANG15 clang-15)
find_program(DEVDL_LLVM_SPIRV llvm-spirv-15)
find_program(DEVDL_NVCC nvcc HINTS /usr/local/cuda/bin)

# Stops the configuration where a rule needs a compiler that is not there.
function(devdl_require_tools)
  foreach(tool ${ARGN})
    if(NOT ${tool})
      message(FATAL_ERROR "devdl: ${tool} not found (clang-15 and llvm-spirv-15 make SPIR-V; nvcc makes CUDA images)")
    endif()
  endforeach()
endfunction()

# OpenCL C `source` -> `dir`/NAME.bc (SPIR, LLVM bitcode) and `dir`/NAME.spv (SPIR-V), where
# NAME is the source's name without extension, compiled with OPTIONS (default -O1). Appends both
# paths to the list `out_var`.
function(devdl_opencl_images out_var source dir)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "OPTIONS")
  if(NOT arg_OPTIONS)
    set(arg_OPTIONS -O1)
  endif()
  devdl_require_tools(DEVDL_CLANG15 DEVDL_LLVM_SPIRV)
  get_filename_component(name ${source} NAME_WE)
  add_custom_command(
    OUTPUT ${dir}/${name}.bc ${dir}/${name}.spv
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${DEVDL_CLANG15} -cl-std=CL2.0 -target spir64 ${arg_OPTIONS} -emit-llvm -c ${source} -o ${dir}/${name}.bc
    COMMAND ${DEVDL_LLVM_SPIRV} ${dir}/${name}.bc -o ${dir}/${name}.spv
    DEPENDS ${source}
    COMMENT "Compiling ${name}.cl to SPIR and SPIR-V")
  set(${out_var} ${${out_var}} ${dir}/${name}.bc ${dir}/${name}.spv PARENT_SCOPE)
endfunction()

# CUDA `source` -> relocatable (-rdc, so imports stay imports) `dir`/NAME.cubin for sm_90 and,
# with PTX, NAME.ptx and NAME.fatbin (sm_90 cubin + compute_90 PTX). Needs DEVDL_NVCC.
function(devdl_cuda_images out_var source dir)
  devdl_require_tools(DEVDL_NVCC)
  get_filename_component(name ${source} NAME_WE)
  set(outputs ${dir}/${name}.cubin ${dir}/${name}.ptx ${dir}/${name}.fatbin)
  set(nvcc ${DEVDL_NVCC} -rdc=true)
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${nvcc} -arch=sm_90 -cubin ${source} -o ${dir}/${name}.cubin
    COMMAND ${nvcc} -arch=sm_90 -ptx ${source} -o ${dir}/${name}.ptx
    COMMAND ${nvcc} -fatbin -gencode arch=compute_90,code=[sm_90,compute_90] ${source} -o ${dir}/${name}.fatbin
    DEPENDS ${source}
    COMMENT "Compiling ${name}.cu to cubin, PTX and fatbin")
  set(${out_var} ${${out_var}} ${outputs} PARENT_SCOPE)
endfunction()

# LTO-IR as nvcc -dlto writes it, in `dir`: NAME.lto.fatbin (LTO-IR with PTX beside it: devdl
# reads the PTX's symbols and nvJitLink optimizes the LTO-IR with the rest of the program) and
# NAME.ltoir (LTO-IR alone).
function(devdl_cuda_lto_images out_var source dir)
  devdl_require_tools(DEVDL_NVCC)
  get_filename_component(name ${source} NAME_WE)
  set(outputs ${dir}/${name}.lto.fatbin ${dir}/${name}.ltoir)
  set(nvcc ${DEVDL_NVCC} -rdc=true -dlto -arch=sm_90)
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${nvcc} -fatbin ${source} -o ${dir}/${name}.lto.fatbin
    COMMAND ${nvcc} --ltoir ${source} -o ${dir}/${name}.ltoir
    DEPENDS ${source}
    COMMENT "Compiling ${name}.cu to LTO-IR")
  set(${out_var} ${${out_var}} ${outputs} PARENT_SCOPE)
endfunction()

# A relocatable host object carrying `images` as one bundle, made by devdl-pack; extra
# arguments go to devdl-pack before the images (e.g. --module-id NAME).
function(devdl_bundle_object object)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "IMAGES;OPTIONS")
  add_custom_command(
    OUTPUT ${object}
    COMMAND devdl::devdl-pack --object -o ${object} ${arg_OPTIONS} ${arg_IMAGES}
    DEPENDS devdl::devdl-pack ${arg_IMAGES}
    COMMENT "Packing device images into ${object}")
endfunction()
