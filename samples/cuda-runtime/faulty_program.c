/* Linked with libcuda-runtime-faulty.so, registered as the program starts: its program, which
 * reaches libcudamath's table, is linked and loaded before main. devdl runs the constructors of
 * the tools preloaded into the program (compute-sanitizer's) before it starts CUDA there, so that
 * they see CUDA start.
 *
 *   cuda-runtime-faulty-program */
#include <stdio.h>

int plugin_run(int *out);

int main(void) {
  int out[64];
  const int err = plugin_run(out);
  printf("plugin_run: %d\n", err);
  return err != 0;
}
