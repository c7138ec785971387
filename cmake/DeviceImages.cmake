# Rules that build device images from source with the real compilers and pack them, installed
# with devdl's CMake package (find_package(devdl)) and used by devdl's own samples and tests.
#
# For projects:
#   devdl_add_images(NAME SOURCES file.cl|file.cu... [FORMATS ...] [OPTIONS ...] [CUDA_ARCH N]
#                    [OUTPUT_DIRECTORY dir])
#     A target NAME that compiles each source into device images; its DEVDL_IMAGES property
#     lists them. OpenCL C (.cl, clang-15 + llvm-spirv-15) makes `spirv` (the default) and
#     `spir` (LLVM bitcode); CUDA (.cu, nvcc -rdc=true, so imports stay imports) makes `cubin`
#     (the default), `ptx`, `fatbin` (cubin + PTX) and `lto` (a fatbin with LTO-IR, for
#     nvJitLink). OPTIONS go to the compiler (OpenCL C default: -O1). CUDA_ARCH is the GPU
#     architecture number (default 90: sm_90).
#   devdl_add_bundle(NAME OUTPUT file IMAGES file|target... [NEEDED name...] [RUNPATH dir...]
#                    [OPTIONS ...] [INSTALL])
#     A target NAME that packs the images (files, or targets of devdl_add_images) into one
#     bundle file with devdl-pack; OPTIONS go to devdl-pack before the images. NEEDED names the
#     files the bundle needs (loaded with it, as DT_NEEDED), RUNPATH where they are looked for
#     first ("$ORIGIN/deps": the bundle's own directory's deps). INSTALL installs it where devdl
#     looks for names without a slash: ${CMAKE_INSTALL_LIBDIR}/devdl.
#   devdl_embed_images(TARGET [SOURCES ...] [IMAGES file|target...] [MODULE_ID id]
#                      [NEEDED name...] [RUNPATH dir...] [FORMATS ...] [OPTIONS ...] [CUDA_ARCH N])
#     Makes the host library or executable TARGET carry the images (SOURCES are compiled as
#     devdl_add_images does, with FORMATS, OPTIONS and CUDA_ARCH): devdl-pack --object writes
#     them as one bundle into an object linked into TARGET, so that a process that loads TARGET
#     has them in devdl's search order. MODULE_ID names the image (there must be one) for other
#     images' `devdl-pack --depends`; NEEDED and RUNPATH as devdl_add_bundle's: the files are
#     loaded when devdl first sees TARGET loaded (or opens it), $ORIGIN being TARGET's
#     directory. Once per target.
#   devdl_cuda_link_at_load(TARGET)
#     For a SHARED or MODULE library or an executable with CUDA_SEPARABLE_COMPILATION ON: its
#     device code is linked when it loads, by libdevdl, against the device code already in the
#     process (other shared libraries' too), instead of by nvcc -dlink at build time. CMake's
#     device link is turned off (CUDA_RESOLVE_DEVICE_SYMBOLS OFF); devdl-pack --cuda-register
#     writes the registration object from the target's objects before it links, and TARGET links
#     it, libdevdl and the shared CUDA runtime (one runtime knows every library's kernels and
#     variables), each library it links needed even where only its device code is used
#     (--no-as-needed). With nvcc 13, host code sees device entities of other libraries
#     (--device-entity-has-hidden-visibility=false). The target may use either signature of
#     target_link_libraries; its CUDA_RUNTIME_LIBRARY must stay Shared (checked once its directory
#     is read). With nvcc -dlto (CUDA_FLAGS, target_compile_options, or CMake's
#     INTERPROCEDURAL_OPTIMIZATION on the target), libdevdl links the LTO-IR with nvJitLink.
#   devdl_cuda_link_at_load_all()
#     The same for every target created after it, in this directory and those below, that sets
#     CUDA_SEPARABLE_COMPILATION ON, through CMake's own device link: its rules
#     (CMAKE_CUDA_DEVICE_LINK_LIBRARY and _EXECUTABLE) run devdl-pack --cuda-register instead of
#     nvcc -dlink, the CUDA runtime is shared (CMAKE_CUDA_RUNTIME_LIBRARY), and those targets link
#     libdevdl. A macro: call it in the directory whose targets it serves, after project(). A tree
#     that is not to be edited gets it for every project() from the file beside this one:
#     cmake -DCMAKE_PROJECT_INCLUDE=<devdl_DIR>/devdlCudaLinkAtLoad.cmake
#
# Under them, the rules for one source: devdl_image_rules (below), and the shorthands devdl's
# own tests use (devdl_opencl_images, devdl_cuda_images, devdl_cuda_lto_images), and
# devdl_bundle_object (a host object carrying images, without a target to carry it).
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

# The rule that compiles one source (OpenCL C or CUDA) into `dir`, with the FORMATS, OPTIONS
# and CUDA_ARCH of devdl_add_images, plus `ltoir` (CUDA's LTO-IR alone, NAME.ltoir), and the
# files it includes as DEPENDS. Appends the images to the list `out_var`.
function(devdl_image_rules out_var source dir)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "CUDA_ARCH" "FORMATS;OPTIONS;DEPENDS")
  get_filename_component(source ${source} ABSOLUTE)
  get_filename_component(stem ${source} NAME_WE)
  get_filename_component(extension ${source} LAST_EXT)
  set(formats ${arg_FORMATS})
  set(commands)
  set(outputs)
  if(extension STREQUAL ".cl")
    devdl_require_tools(DEVDL_CLANG15 DEVDL_LLVM_SPIRV)
    if(NOT formats)
      set(formats spirv)
    endif()
    set(options ${arg_OPTIONS})
    if(NOT options)
      set(options -O1)
    endif()
    set(bc ${dir}/${stem}.bc)  # SPIR; llvm-spirv translates it
    list(APPEND commands COMMAND ${DEVDL_CLANG15} -cl-std=CL2.0 -target spir64 ${options} -emit-llvm -c ${source} -o ${bc})
    foreach(format ${formats})
      if(format STREQUAL "spirv")
        list(APPEND commands COMMAND ${DEVDL_LLVM_SPIRV} ${bc} -o ${dir}/${stem}.spv)
        list(APPEND outputs ${dir}/${stem}.spv)
      elseif(format STREQUAL "spir")
        list(APPEND outputs ${bc})
      else()
        message(FATAL_ERROR "devdl: OpenCL C (${source}) makes spirv or spir, not `${format}`")
      endif()
    endforeach()
    if(NOT "spir" IN_LIST formats)
      list(APPEND commands COMMAND ${CMAKE_COMMAND} -E remove ${bc})
    endif()
  elseif(extension STREQUAL ".cu")
    devdl_require_tools(DEVDL_NVCC)
    if(NOT formats)
      set(formats cubin)
    endif()
    set(arch ${arg_CUDA_ARCH})
    if(NOT arch)
      set(arch 90)
    endif()
    set(nvcc ${DEVDL_NVCC} -rdc=true ${arg_OPTIONS})  # relocatable: imports stay imports
    foreach(format ${formats})
      if(format STREQUAL "cubin")
        set(output ${dir}/${stem}.cubin)
        list(APPEND commands COMMAND ${nvcc} -arch=sm_${arch} -cubin ${source} -o ${output})
      elseif(format STREQUAL "ptx")
        set(output ${dir}/${stem}.ptx)
        list(APPEND commands COMMAND ${nvcc} -arch=sm_${arch} -ptx ${source} -o ${output})
      elseif(format STREQUAL "fatbin")
        set(output ${dir}/${stem}.fatbin)
        list(APPEND commands COMMAND ${nvcc} -fatbin -gencode arch=compute_${arch},code=[sm_${arch},compute_${arch}]
                                     ${source} -o ${output})
      elseif(format STREQUAL "lto")
        set(output ${dir}/${stem}.lto.fatbin)
        list(APPEND commands COMMAND ${nvcc} -dlto -arch=sm_${arch} -fatbin ${source} -o ${output})
      elseif(format STREQUAL "ltoir")
        set(output ${dir}/${stem}.ltoir)
        list(APPEND commands COMMAND ${nvcc} -dlto -arch=sm_${arch} --ltoir ${source} -o ${output})
      else()
        message(FATAL_ERROR "devdl: CUDA (${source}) makes cubin, ptx, fatbin, lto or ltoir, not `${format}`")
      endif()
      list(APPEND outputs ${output})
    endforeach()
  else()
    message(FATAL_ERROR "devdl: ${source} is neither OpenCL C (.cl) nor CUDA (.cu)")
  endif()
  string(REPLACE ";" ", " listed "${formats}")
  add_custom_command(OUTPUT ${outputs}
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
                     ${commands}
                     DEPENDS ${source} ${arg_DEPENDS}
                     COMMENT "Compiling ${stem}${extension} to device images (${listed})"
                     VERBATIM)
  set(${out_var} ${${out_var}} ${outputs} PARENT_SCOPE)
endfunction()

function(devdl_add_images name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "CUDA_ARCH;OUTPUT_DIRECTORY" "SOURCES;FORMATS;OPTIONS")
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "devdl_add_images(${name}): no SOURCES")
  endif()
  if(NOT arg_OUTPUT_DIRECTORY)
    set(arg_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/${name})
  endif()
  set(images)
  foreach(source ${arg_SOURCES})
    devdl_image_rules(images ${source} ${arg_OUTPUT_DIRECTORY}
                      FORMATS ${arg_FORMATS} OPTIONS ${arg_OPTIONS} CUDA_ARCH ${arg_CUDA_ARCH})
  endforeach()
  add_custom_target(${name} ALL DEPENDS ${images})
  set_target_properties(${name} PROPERTIES DEVDL_IMAGES "${images}")
endfunction()

# The image files of `items` (files, or targets made by devdl_add_images) in `files_var`, and
# what a rule that reads them must depend on in `depends_var`.
function(devdl_image_files files_var depends_var)
  set(files)
  set(depends)
  foreach(item ${ARGN})
    if(TARGET ${item})
      get_target_property(images ${item} DEVDL_IMAGES)
      if(NOT images)
        message(FATAL_ERROR "devdl: target ${item} has no device images (make it with devdl_add_images)")
      endif()
      list(APPEND files ${images})
      list(APPEND depends ${item} ${images})
    else()
      get_filename_component(item ${item} ABSOLUTE)
      list(APPEND files ${item})
      list(APPEND depends ${item})
    endif()
  endforeach()
  set(${files_var} ${files} PARENT_SCOPE)
  set(${depends_var} ${depends} PARENT_SCOPE)
endfunction()

# devdl-pack's --needed and --runpath for NEEDED and RUNPATH lists, in `out_var`: they apply to the
# file that follows them, and one image recording them is enough (they are the whole file's).
function(devdl_needed_options out_var needed runpath)
  set(options)
  if(needed)
    list(JOIN needed "," joined)
    list(APPEND options --needed ${joined})
  endif()
  if(runpath)
    list(JOIN runpath ":" joined)
    list(APPEND options --runpath ${joined})
  endif()
  set(${out_var} ${options} PARENT_SCOPE)
endfunction()

function(devdl_add_bundle name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "INSTALL" "OUTPUT" "IMAGES;OPTIONS;NEEDED;RUNPATH")
  if(NOT arg_OUTPUT OR NOT arg_IMAGES)
    message(FATAL_ERROR "devdl_add_bundle(${name}): OUTPUT and IMAGES are required")
  endif()
  get_filename_component(output ${arg_OUTPUT} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_BINARY_DIR})
  devdl_image_files(files depends ${arg_IMAGES})
  devdl_needed_options(needs "${arg_NEEDED}" "${arg_RUNPATH}")
  add_custom_command(OUTPUT ${output}
                     COMMAND devdl::devdl-pack -o ${output} ${arg_OPTIONS} ${needs} ${files}
                     DEPENDS devdl::devdl-pack ${depends}
                     COMMENT "Packing device images into ${output}"
                     VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${output})
  if(arg_INSTALL)
    include(GNUInstallDirs)
    install(FILES ${output} DESTINATION ${CMAKE_INSTALL_LIBDIR}/devdl)
  endif()
endfunction()

# A relocatable host object carrying IMAGES (files or devdl_add_images targets) as one bundle,
# made by devdl-pack --object; OPTIONS go to devdl-pack before the images.
function(devdl_bundle_object object)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "IMAGES;OPTIONS")
  devdl_image_files(files depends ${arg_IMAGES})
  add_custom_command(OUTPUT ${object}
                     COMMAND devdl::devdl-pack --object -o ${object} ${arg_OPTIONS} ${files}
                     DEPENDS devdl::devdl-pack ${depends}
                     COMMENT "Packing device images into ${object}"
                     VERBATIM)
endfunction()

function(devdl_embed_images target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "MODULE_ID;CUDA_ARCH" "SOURCES;IMAGES;FORMATS;OPTIONS;NEEDED;RUNPATH")
  set(items ${arg_IMAGES})
  if(arg_SOURCES)
    devdl_add_images(${target}_device_images SOURCES ${arg_SOURCES} FORMATS ${arg_FORMATS}
                     OPTIONS ${arg_OPTIONS} CUDA_ARCH ${arg_CUDA_ARCH})
    list(APPEND items ${target}_device_images)
  endif()
  if(NOT items)
    message(FATAL_ERROR "devdl_embed_images(${target}): no SOURCES or IMAGES")
  endif()
  set(options)
  if(arg_MODULE_ID)
    devdl_image_files(files depends ${items})
    list(LENGTH files count)
    if(NOT count EQUAL 1)
      message(FATAL_ERROR "devdl_embed_images(${target}): MODULE_ID names one image, and there are ${count}")
    endif()
    set(options --module-id ${arg_MODULE_ID})
  endif()
  devdl_needed_options(needs "${arg_NEEDED}" "${arg_RUNPATH}")
  list(APPEND options ${needs})
  set(object ${CMAKE_CURRENT_BINARY_DIR}/${target}_devdl_bundle.o)
  devdl_bundle_object(${object} IMAGES ${items} OPTIONS ${options})
  target_sources(${target} PRIVATE ${object})
endfunction()

function(devdl_cuda_link_at_load target)
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE)$")
    message(FATAL_ERROR "devdl_cuda_link_at_load(${target}): a shared or module library, or an executable")
  endif()
  set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION ON CUDA_RESOLVE_DEVICE_SYMBOLS OFF
                                             CUDA_RUNTIME_LIBRARY Shared)
  devdl_cuda_link_options(${target})
  # Once the directory is read: the project may link libraries or set the runtime after this call
  # (the target's name written in now: a deferred call reads variables when it runs).
  cmake_language(EVAL CODE "cmake_language(DEFER CALL devdl_cuda_register_at_link [[${target}]])")
endfunction()

# The static libraries of relocatable device code `target` links, directly or through other
# static libraries (a cycle of them included), into `out_var`: nvcc -dlink reads their device
# code with the target's objects.
function(devdl_cuda_static_libraries out_var target)
  set(found)
  set(seen)
  get_target_property(pending ${target} LINK_LIBRARIES)
  while(pending)
    list(POP_FRONT pending library)
    if(library MATCHES "^\\$<LINK_ONLY:(.*)>$")
      set(library ${CMAKE_MATCH_1})
    endif()
    if(NOT TARGET "${library}")
      continue()
    endif()
    get_target_property(aliased ${library} ALIASED_TARGET)
    if(aliased)
      set(library ${aliased})
    endif()
    get_target_property(type ${library} TYPE)
    if(NOT type STREQUAL "STATIC_LIBRARY" OR library IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${library})
    get_target_property(separable ${library} CUDA_SEPARABLE_COMPILATION)
    if(separable)
      list(APPEND found ${library})
    endif()
    get_target_property(more ${library} INTERFACE_LINK_LIBRARIES)
    if(more)
      list(APPEND pending ${more})
    endif()
  endwhile()
  set(${out_var} ${found} PARENT_SCOPE)
endfunction()

# devdl_cuda_link_at_load's deferred part: the registration object, written by devdl-pack
# --cuda-register from the target's objects and the static libraries of device code it links
# (whose objects the host link then takes, as it takes nvcc -dlink's), before the link that
# takes it; and the shared runtime checked.
function(devdl_cuda_register_at_link target)
  devdl_require_shared_cuda_runtime(${target})
  set(object ${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/${target}.dir/devdl_cuda_register.o)
  set(cc)
  if(CMAKE_C_COMPILER)
    set(cc --cc ${CMAKE_C_COMPILER})
  endif()
  devdl_cuda_static_libraries(libraries ${target})
  set(files)
  foreach(library ${libraries})
    list(APPEND files $<TARGET_FILE:${library}>)
  endforeach()
  add_custom_command(TARGET ${target} PRE_LINK
                     COMMAND devdl::devdl-pack --cuda-register ${cc} -o ${object}
                             "$<TARGET_OBJECTS:${target}>" ${files}
                     COMMAND_EXPAND_LISTS VERBATIM)
  target_link_options(${target} PRIVATE ${object})
  # Linked again when devdl-pack changes, as its object may.
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS $<TARGET_FILE:devdl::devdl-pack>)
endfunction()

# What a target whose device code libdevdl links needs of its build, with either signature of
# target_link_libraries (the property, not the command: the two signatures cannot mix on one
# target, and the project's own calls may use either): libdevdl, each library it links needed even
# where only its device code is used, and with nvcc 13 its device entities seen by other
# libraries' host code.
function(devdl_cuda_link_options target)
  set_property(TARGET ${target} APPEND PROPERTY LINK_LIBRARIES devdl::devdl)
  target_link_options(${target} PRIVATE LINKER:--no-as-needed)
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 13)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--device-entity-has-hidden-visibility=false>)
  endif()
endfunction()

# One CUDA runtime must know every library's kernels and variables (kernel<<<>>>, cudaMemcpyToSymbol
# across libraries): the static one is a copy in each library and executable.
function(devdl_require_shared_cuda_runtime target)
  get_target_property(runtime ${target} CUDA_RUNTIME_LIBRARY)
  string(TOLOWER "${runtime}" runtime_lower)
  if(NOT runtime_lower STREQUAL "shared")
    message(FATAL_ERROR "devdl_cuda_link_at_load(${target}): CUDA_RUNTIME_LIBRARY is ${runtime}, not Shared: "
                        "libdevdl registers the target's device code with the CUDA runtime it links, which must be "
                        "the one every library and the executable share (a static runtime is a copy in each, "
                        "which knows only its own kernels and variables)")
  endif()
endfunction()

macro(devdl_cuda_link_at_load_all)
  # Where CUDA is enabled: the device link rules are the CUDA language's.
  get_property(_devdl_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CUDA" IN_LIST _devdl_languages)
    message(FATAL_ERROR "devdl_cuda_link_at_load_all(): call it after project() or enable_language() enables CUDA")
  endif()
  get_target_property(_devdl_pack devdl::devdl-pack IMPORTED_LOCATION)
  if(NOT _devdl_pack)
    get_target_property(_devdl_configs devdl::devdl-pack IMPORTED_CONFIGURATIONS)
    list(GET _devdl_configs 0 _devdl_config)
    get_target_property(_devdl_pack devdl::devdl-pack IMPORTED_LOCATION_${_devdl_config})
  endif()
  # nvcc -dlink's place: the objects, and the static libraries it would read (<LINK_LIBRARIES>:
  # paths, -l and -L), registered by devdl's object instead.
  set(_devdl_register "\"${_devdl_pack}\" --cuda-register --cc \"${CMAKE_C_COMPILER}\" -o <TARGET> <OBJECTS> <LINK_LIBRARIES>")
  if(NOT CMAKE_C_COMPILER)
    set(_devdl_register "\"${_devdl_pack}\" --cuda-register -o <TARGET> <OBJECTS> <LINK_LIBRARIES>")
  endif()
  set(CMAKE_CUDA_DEVICE_LINK_LIBRARY "${_devdl_register}")
  set(CMAKE_CUDA_DEVICE_LINK_EXECUTABLE "${_devdl_register}")
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  # What devdl_cuda_link_options gives a target, to those with relocatable device code alone.
  set(_devdl_rdc "$<BOOL:$<TARGET_PROPERTY:CUDA_SEPARABLE_COMPILATION>>")
  link_libraries("$<${_devdl_rdc}:devdl::devdl>")
  add_link_options("$<${_devdl_rdc}:LINKER:--no-as-needed>")
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 13)
    add_compile_options("$<$<AND:$<COMPILE_LANGUAGE:CUDA>,${_devdl_rdc}>:--device-entity-has-hidden-visibility=false>")
  endif()
endmacro()

# Shorthands for one source, as devdl's tests use them; each appends its images to `out_var`.
# OpenCL C -> `dir`/NAME.bc (SPIR) and NAME.spv (SPIR-V), with OPTIONS (default -O1).
function(devdl_opencl_images out_var source dir)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "OPTIONS")
  set(images)  # not the caller's
  devdl_image_rules(images ${source} ${dir} FORMATS spir spirv OPTIONS ${arg_OPTIONS})
  set(${out_var} ${${out_var}} ${images} PARENT_SCOPE)
endfunction()

# CUDA -> `dir`/NAME.cubin, NAME.ptx and NAME.fatbin for sm_90.
function(devdl_cuda_images out_var source dir)
  set(images)  # not the caller's
  devdl_image_rules(images ${source} ${dir} FORMATS cubin ptx fatbin)
  set(${out_var} ${${out_var}} ${images} PARENT_SCOPE)
endfunction()

# CUDA -> `dir`/NAME.lto.fatbin (LTO-IR with PTX beside it: devdl reads the PTX's symbols and
# nvJitLink optimizes the LTO-IR with the rest of the program) and NAME.ltoir (LTO-IR alone).
function(devdl_cuda_lto_images out_var source dir)
  set(images)  # not the caller's
  devdl_image_rules(images ${source} ${dir} FORMATS lto ltoir)
  set(${out_var} ${${out_var}} ${images} PARENT_SCOPE)
endfunction()
