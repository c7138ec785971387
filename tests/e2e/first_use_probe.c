/* A thread pool whose workers load their kernels when they start: THREADS threads (default 8)
 * whose first devdl calls coincide (a barrier) each open LIB (DEVDL_LAZY | DEVDL_GLOBAL) and APP
 * (DEVDL_LAZY) and look up KERNEL. Prints each failure with devdl's error, then "N of T found K
 * (one object)" or "... (different objects)"; exits 0 when every thread found the one object. */
#include <devdl.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { kMaxThreads = 64 };

static const char *lib, *app, *kernel;
static pthread_barrier_t start;

static void *work(void *unused) {
  (void)unused;
  pthread_barrier_wait(&start);
  void *found = NULL;
  if (device_dlopen(lib, DEVDL_LAZY | DEVDL_GLOBAL)) {
    void *handle = device_dlopen(app, DEVDL_LAZY);
    if (handle) found = device_dlsym(handle, kernel);
  }
  if (!found) printf("failed: %s\n", device_dlerror());
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
  for (int i = 0; i < count; ++i) pthread_create(&threads[i], NULL, work, NULL);
  void *first = NULL;
  int found = 0, same = 1;
  for (int i = 0; i < count; ++i) {
    void *got = NULL;
    pthread_join(threads[i], &got);
    if (!got) continue;
    if (!first) first = got;
    same = same && got == first;
    ++found;
  }
  printf("%d of %d found %s (%s)\n", found, count, kernel, same ? "one object" : "different objects");
  return found == count && same ? 0 : 1;
}
