/* A host library laid out as DPC++'s offload wrapper lays out one, written in C: a descriptor
 * named .sycl_offloading.descriptor, version 3 device binaries with their entries and property
 * sets, every pointer an address the dynamic linker relocates. It carries the seed's lib.spv and
 * app.spv (LIB_IMAGE, APP_IMAGE), as is; app's image asks for aspect fp64 and has a number and a
 * string among its properties. A test input of devdl's reader that needs no DPC++, and a seed of
 * its fuzzer. */
#include <stdint.h>

struct entry {
  void *address;
  const char *name;
  uint64_t size;
  int32_t flags, reserved;
};
struct property {
  const char *name;
  const void *value;
  uint32_t type; /* 1 uint32 (the value is `size`), 2 byte array (its length in bits first), 3 string */
  uint64_t size;
};
struct property_set {
  const char *name;
  const struct property *begin, *end;
};
struct device_binary {
  uint16_t version; /* 3 */
  uint8_t kind;     /* 4: SYCL */
  uint8_t format;   /* 0: as it is */
  const char *target, *compile_options, *link_options;
  const unsigned char *image_begin, *image_end;
  const struct entry *entries_begin, *entries_end;
  const struct property_set *sets_begin, *sets_end;
};
struct descriptor {
  uint16_t version; /* 1 */
  uint16_t count;
  const struct device_binary *binaries;
  const struct entry *host_begin, *host_end;
};

extern const unsigned char lib_image[], lib_image_end[], app_image[], app_image_end[];
/* In the section DPC++ puts its images in, as devdl looks for it. */
__asm__(".section __CLANG_OFFLOAD_BUNDLE__sycl-spir64,\"a\"\n"
        ".balign 16\nlib_image:\n.incbin \"" LIB_IMAGE "\"\nlib_image_end:\n"
        ".balign 16\napp_image:\n.incbin \"" APP_IMAGE "\"\napp_image_end:\n"
        ".text\n");

static const struct entry lib_entries[] = {{0, "LibDeviceFunc", 0, 0, 0}};
static const struct entry app_entries[] = {{0, "AppKernel", 0, 0, 0}};
static const unsigned char fp64[] = {32, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0};
static const struct property requirements[] = {{"aspects", fp64, 2, sizeof fp64}};
static const struct property misc[] = {{"optLevel", 0, 1, 2}, {"note", "made by devdl's tests", 3, 21}};
static const struct property_set app_sets[] = {{"SYCL/device requirements", requirements, requirements + 1},
                                               {"SYCL/misc properties", misc, misc + 2}};
static const struct device_binary binaries[] = {
    {3, 4, 0, "spir64", "", "", lib_image, lib_image_end, lib_entries, lib_entries + 1, 0, 0},
    {3, 4, 0, "spir64", "", "", app_image, app_image_end, app_entries, app_entries + 1, app_sets, app_sets + 2},
};
static const struct descriptor descriptor __asm__(".sycl_offloading.descriptor") = {1, 2, binaries, 0, 0};

/* Kept referenced, so that a link that drops what nothing uses (--gc-sections) keeps it. */
const void *devdl_test_descriptor(void) { return &descriptor; }

/* DPC++'s constructor hands the descriptor to the SYCL runtime, which is how devdl knows a loaded
 * object has offload tables (it imports __sycl_register_lib). The import is weak here, so that
 * the library loads where no SYCL runtime is: the constructor then has nobody to tell. */
extern void __sycl_register_lib(const struct descriptor *) __attribute__((weak));
__attribute__((constructor)) static void registerTables(void) {
  if (__sycl_register_lib) __sycl_register_lib(&descriptor);
}
