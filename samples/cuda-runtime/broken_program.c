/* Linked with libcuda-runtime-broken-linked.so (broken.cu: a kernel calling a device function
 * nothing defines), which the host loader loads with the program: as ld.so ends a program whose
 * libraries' symbols do not resolve ("symbol lookup error", exit status 127), devdl's registration
 * ends this one before main, saying which symbol of which library. main never runs.
 *
 *   cuda-runtime-broken-program */
#include <stdio.h>

int broken_run(void);

int main(void) {
  printf("main ran: broken_run gave %d\n", broken_run());
  return 0;
}
