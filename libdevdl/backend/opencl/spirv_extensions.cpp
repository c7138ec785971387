// What an OpenCL device takes of SPIR-V's extensions: its own answer, and what devdl knows of its
// driver's.
#include "backend/opencl/spirv_extensions.h"

#include "backend/opencl/opencl_info.h"

#include <llvm/ADT/STLExtras.h>

#include <string_view>

namespace devdl::backend::opencl {

namespace {

// cl_khr_spirv_queries (OpenCL 3.0.16): an array of the driver's strings.
constexpr cl_device_info kDeviceSpirvExtensions = 0x12BA;

// What Intel's OpenCL CPU runtime (2026.22) compiles, each extension declared alone in a module
// and handed to clCreateProgramWithIL and clCompileProgram (scripts/spirv-extensions-taken.sh
// makes this list again for another version). It knows none of the names the SPIRV-LLVM-Translator
// 15 wrote for some of these before they were renamed (SPV_INTEL_long_constant_composite, now
// SPV_INTEL_long_composites; SPV_INTEL_fast_composite; SPV_INTEL_non_constant_addrspace_printf).
constexpr std::string_view kIntelCpuRuntime[] = {
    "SPV_ALTERA_arbitrary_precision_integers", "SPV_AMD_weak_linkage", "SPV_EXT_arithmetic_fence",
    "SPV_EXT_float8", "SPV_EXT_image_raw10_raw12", "SPV_EXT_long_vector", "SPV_EXT_ocp_microscaling_types",
    "SPV_EXT_optnone", "SPV_EXT_relaxed_printf_string_address_space", "SPV_EXT_shader_atomic_float16_add",
    "SPV_EXT_shader_atomic_float_add", "SPV_EXT_shader_atomic_float_min_max", "SPV_EXT_shader_image_int64",
    "SPV_INTEL_16bit_atomics", "SPV_INTEL_2d_block_io", "SPV_INTEL_arbitrary_precision_fixed_point",
    "SPV_INTEL_arbitrary_precision_floating_point", "SPV_INTEL_arbitrary_precision_integers",
    "SPV_INTEL_arithmetic_fence", "SPV_INTEL_bfloat16_arithmetic", "SPV_INTEL_bfloat16_conversion",
    "SPV_INTEL_bindless_images", "SPV_INTEL_blocking_pipes", "SPV_INTEL_cache_controls",
    "SPV_INTEL_complex_float_mul_div", "SPV_INTEL_debug_module", "SPV_INTEL_device_barrier",
    "SPV_INTEL_device_side_avc_motion_estimation", "SPV_INTEL_float4", "SPV_INTEL_float_controls2",
    "SPV_INTEL_fp_conversions", "SPV_INTEL_fp_fast_math_mode", "SPV_INTEL_fp_max_error",
    "SPV_INTEL_fpga_argument_interfaces", "SPV_INTEL_fpga_buffer_location",
    "SPV_INTEL_fpga_cluster_attributes", "SPV_INTEL_fpga_dsp_control",
    "SPV_INTEL_fpga_invocation_pipelining_attributes", "SPV_INTEL_fpga_latency_control",
    "SPV_INTEL_fpga_loop_controls", "SPV_INTEL_fpga_memory_accesses", "SPV_INTEL_fpga_memory_attributes",
    "SPV_INTEL_fpga_reg", "SPV_INTEL_function_pointers", "SPV_INTEL_global_variable_decorations",
    "SPV_INTEL_global_variable_fpga_decorations", "SPV_INTEL_global_variable_host_access",
    "SPV_INTEL_hw_thread_queries", "SPV_INTEL_inline_assembly", "SPV_INTEL_int4", "SPV_INTEL_io_pipes",
    "SPV_INTEL_joint_matrix", "SPV_INTEL_kernel_attributes", "SPV_INTEL_long_composites",
    "SPV_INTEL_loop_fuse", "SPV_INTEL_masked_gather_scatter", "SPV_INTEL_maximum_registers",
    "SPV_INTEL_media_block_io", "SPV_INTEL_memory_access_aliasing", "SPV_INTEL_optimization_hints",
    "SPV_INTEL_optnone", "SPV_INTEL_predicated_io", "SPV_INTEL_rounded_divide_sqrt",
    "SPV_INTEL_runtime_aligned", "SPV_INTEL_sigmoid", "SPV_INTEL_split_barrier",
    "SPV_INTEL_subgroup_buffer_prefetch", "SPV_INTEL_subgroup_matrix_multiply_accumulate",
    "SPV_INTEL_subgroup_matrix_multiply_accumulate_float4",
    "SPV_INTEL_subgroup_matrix_multiply_accumulate_float8", "SPV_INTEL_subgroup_requirements",
    "SPV_INTEL_subgroup_scaled_matrix_multiply_accumulate", "SPV_INTEL_subgroups", "SPV_INTEL_task_sequence",
    "SPV_INTEL_tensor_float32_conversion", "SPV_INTEL_ternary_bitwise_function", "SPV_INTEL_token_type",
    "SPV_INTEL_unstructured_loop_controls", "SPV_INTEL_usm_storage_classes",
    "SPV_INTEL_variable_length_array", "SPV_INTEL_vector_compute", "SPV_KHR_abort", "SPV_KHR_bfloat16",
    "SPV_KHR_bit_instructions", "SPV_KHR_cooperative_matrix", "SPV_KHR_expect_assume",
    "SPV_KHR_float_controls", "SPV_KHR_float_controls2", "SPV_KHR_fma", "SPV_KHR_integer_dot_product",
    "SPV_KHR_linkonce_odr", "SPV_KHR_no_integer_wrap_decoration", "SPV_KHR_non_semantic_info",
    "SPV_KHR_poison_freeze", "SPV_KHR_shader_clock", "SPV_KHR_subgroup_rotate",
    "SPV_KHR_uniform_group_instructions", "SPV_KHR_untyped_pointers", "SPV_NV_shader_atomic_fp16_vector",
};

}  // namespace

std::optional<std::vector<std::string>> spirvExtensionsTaken(const Api &api, cl_platform_id platform,
                                                             cl_device_id device) {
  std::optional<std::vector<std::string>> taken;
  size_t size = 0;
  if (api.clGetDeviceInfo(device, kDeviceSpirvExtensions, 0, nullptr, &size) == CL_SUCCESS) {
    std::vector<const char *> reported(size / sizeof(const char *));
    if (api.clGetDeviceInfo(device, kDeviceSpirvExtensions, reported.size() * sizeof(const char *), reported.data(),
                            nullptr) == CL_SUCCESS) {
      taken.emplace();
      for (const char *name : reported)
        if (name) taken->emplace_back(name);
    }
  }
  if (platformString(api, platform, CL_PLATFORM_NAME) == "Intel(R) OpenCL") {
    if (!taken) taken.emplace();
    for (std::string_view name : kIntelCpuRuntime)
      if (!llvm::is_contained(*taken, name)) taken->emplace_back(name);
  }
  return taken;
}

}  // namespace devdl::backend::opencl
