/* A thread pool whose workers load their kernels when they start: THREADS threads (default 8)
 * whose first devdl calls coincide (a barrier) each open LIB (DEVDL_LAZY | DEVDL_GLOBAL) and APP
 * (DEVDL_LAZY) and look up KERNEL. Prints each failure with devdl's error, then "N of T found K
 * (one object)" (CUDA's, shared), "... (an object each)" (OpenCL's and Level Zero's, one for each
 * thread) or "... (some shared)"; exits 0 when every thread found it, one object or one each. */
#include <devdl.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { kMaxThreads = 64 };

static const char *lib, *app, *kernel;
static pthread_barrier_t start, looked;

static void *work(void *unused) {
  (void)unused;
  pthread_barrier_wait(&start);
  void *found = NULL;
  if (device_dlopen(lib, DEVDL_LAZY | DEVDL_GLOBAL)) {
    void *handle = device_dlopen(app, DEVDL_LAZY);
    if (handle) found = device_dlsym(handle, kernel);
  }
  if (!found) printf("failed: %s\n", device_dlerror());
  /* Alive until every thread has its own: a thread's kernel objects go with it, and a later
   * thread's could be made at a freed one's address. */
  pthread_barrier_wait(&looked);
  return found;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s LIB APP KERNEL [THREADS]\n", argv[0]);
    return 2;
  }
  lib = argv[1];
  app = argv[2];
  kernel = argv[3];
  int count = argc > 4 ? atoi(argv[4]) : 8;
  if (count < 1 || count > kMaxThreads) count = 8;
  pthread_t threads[kMaxThreads];
  pthread_barrier_init(&start, NULL, (unsigned)count);
  pthread_barrier_init(&looked, NULL, (unsigned)count);
  for (int i = 0; i < count; ++i) pthread_create(&threads[i], NULL, work, NULL);
  void *got[kMaxThreads];
  int found = 0;
  for (int i = 0; i < count; ++i) {
    void *kernelFound = NULL;
    pthread_join(threads[i], &kernelFound);
    if (kernelFound) got[found++] = kernelFound;
  }
  int distinct = 0;  /* objects no earlier thread got */
  for (int i = 0; i < found; ++i) {
    int earlier = 0;
    for (int j = 0; j < i; ++j) earlier = earlier || got[j] == got[i];
    distinct += !earlier;
  }
  const char *objects = found == 0         ? "no object"
                        : distinct == 1     ? "one object"
                        : distinct == found ? "an object each"
                                            : "some shared";
  printf("%d of %d found %s (%s)\n", found, count, kernel, objects);
  return found == count && (distinct == 1 || distinct == found) ? 0 : 1;
}
