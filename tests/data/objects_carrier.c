/* A host library whose constructor registers host objects with devdl, as the code a SYCL compiler
 * generates does (seed 002): a device global's host object and a specialization constant's. */
#include "devdl.h"

int devdl_test_counter;                                  /* SharedCounter on the device */
struct { unsigned scale, offset; } devdl_test_constants; /* SpecIds 3 and 7 of spec_kernel */

__attribute__((constructor)) static void registerObjects(void) {
  __register_uniquely_identifiable_object(&devdl_test_counter, "uid_counter", "device_global");
  __register_uniquely_identifiable_object(&devdl_test_constants, "uid_constants", "specialization_id");
}
