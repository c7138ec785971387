// OpenCL C's work-item functions and cl_khr_subgroups' functions, which clang-15 and
// llvm-spirv-15 write as OpenCL's builtin variables (__spirv_BuiltIn*, decorated BuiltIn) loaded
// whole: what the translator takes back.
kernel void WorkItems(global ulong *out) {
  size_t i = 0;
  out[i++] = get_global_id(0);
  out[i++] = get_local_id(1);
  out[i++] = get_group_id(2);
  out[i++] = get_num_groups(0);
  out[i++] = get_global_size(0);
  out[i++] = get_local_size(0);
  out[i++] = get_enqueued_local_size(0);
  out[i++] = get_global_offset(0);
  out[i++] = get_work_dim();
  out[i++] = get_global_linear_id();
  out[i++] = get_local_linear_id();
  out[i++] = get_sub_group_size();
  out[i++] = get_max_sub_group_size();
  out[i++] = get_num_sub_groups();
  out[i++] = get_enqueued_num_sub_groups();
  out[i++] = get_sub_group_id();
  out[i++] = get_sub_group_local_id();
}
