// tend's one N-API addon: the in-process C parts, each under its own name on the module
// (`addon.peerCredentials.inspect`, `addon.durableWrite.writeFile`, …). The build
// (daemon/native/build.mjs) compiles each part on its own and links those that compiled, naming
// them with -DTEND_WITH_<PART>: a part whose C did not compile is absent, and its loader says so
// (daemon/native/load-addon.ts), while the others still load.
#include "addon.h"

bool define_functions(napi_env env, napi_value part, const napi_property_descriptor *functions, size_t count) {
  return napi_define_properties(env, part, count, functions) == napi_ok;
}

// Unused when no part compiled (the build then still links the module, empty).
__attribute__((unused)) static bool add_part(napi_env env, napi_value exports, const char *name, bool (*define)(napi_env, napi_value)) {
  napi_value part;
  if (napi_create_object(env, &part) != napi_ok) return false;
  if (!define(env, part)) return false;
  return napi_set_named_property(env, exports, name, part) == napi_ok;
}

NAPI_MODULE_INIT() {
  (void)env; // unused when no part compiled
  bool ok = true;
#ifdef TEND_WITH_PEER_CREDENTIALS
  ok = ok && add_part(env, exports, "peerCredentials", define_peer_credentials);
#endif
#ifdef TEND_WITH_DURABLE_WRITE
  ok = ok && add_part(env, exports, "durableWrite", define_durable_write);
#endif
#ifdef TEND_WITH_MEMORY_RELEASE
  ok = ok && add_part(env, exports, "memoryRelease", define_memory_release);
#endif
#ifdef TEND_WITH_INSTANCE_LOCK
  ok = ok && add_part(env, exports, "instanceLock", define_instance_lock);
#endif
#ifdef TEND_WITH_HOLDER_CONTROL
  ok = ok && add_part(env, exports, "holderControl", define_holder_control);
#endif
#ifdef TEND_WITH_SPLICE_RELAY
  ok = ok && add_part(env, exports, "spliceRelay", define_splice_relay);
#endif
#ifdef TEND_WITH_SERVICE_NOTIFY
  ok = ok && add_part(env, exports, "serviceNotify", define_service_notify);
#endif
  return ok ? exports : NULL;
}
