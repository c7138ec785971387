/* Opens a plugin with dlopen after main has started, runs its plugin_run and closes it: its
 * libraries are registered, and CUDA starts, only then (cuda-runtime-faulty-program has them
 * registered as it starts, before main).
 *
 *   cuda-runtime-plugin-host PLUGIN.so */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]), 2;
  void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!plugin) return printf("dlopen: %s\n", dlerror()), 1;
  int (*run)(int *) = (int (*)(int *))dlsym(plugin, "plugin_run");
  int out[64];
  const int err = run ? run(out) : -1;
  printf("plugin_run: %d\n", err);
  dlclose(plugin);
  return err != 0;
}
