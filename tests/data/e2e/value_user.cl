int DupValue(void);
kernel void ValueKernel(global int *out) { out[get_global_id(0)] = DupValue(); }
