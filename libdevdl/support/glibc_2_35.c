/* The portable build's floor is glibc 2.35 (Ubuntu 22.04, the wheel's manylinux_2_35): Debian's
 * LLVM 15 static libraries were configured on glibc 2.36 and call arc4random (2.36) for random
 * file names. Linked with -Wl,--wrap=arc4random (CMakeLists.txt, DEVDL_PORTABLE), their calls
 * come here: the same bytes from the kernel, through getrandom (2.25). */
#include <stdint.h>
#include <sys/random.h>

uint32_t __wrap_arc4random(void) {
  uint32_t value = 0;
  while (getrandom(&value, sizeof value, 0) != (long)sizeof value) {
  }
  return value;
}
