// releaseFreeMemory(): hands the pages glibc's malloc keeps free back to the kernel (malloc_trim).
// Parsing and compiling the daemon's code at start, and each burst of requests, allocate and free
// megabytes through malloc; glibc keeps the freed memory mapped for reuse, so an idle daemon would
// stay as large as its busiest moment. Answers whether any memory was released. Without glibc
// (another C library) it does nothing and answers false. A part of the addon daemon/native/addon.c.
#include "../native/addon.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

static napi_value release_free_memory(napi_env env, napi_callback_info info) {
  (void)info;
  bool released = false;
#if defined(__GLIBC__)
  released = malloc_trim(0) == 1;
#endif
  napi_value result;
  if (napi_get_boolean(env, released, &result) != napi_ok) return NULL;
  return result;
}

bool define_memory_release(napi_env env, napi_value part) {
  const napi_property_descriptor functions[] = {
      {"releaseFreeMemory", NULL, release_free_memory, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return define_functions(env, part, functions, sizeof functions / sizeof functions[0]);
}
