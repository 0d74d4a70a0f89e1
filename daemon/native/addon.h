// The parts of tend's one N-API addon (addon.c). Each part is one C file in the folder of the code
// that uses it, and fills the object it is given with its functions (false when N-API refused).
// node_api.h only (N-API 8): one build loads in every Node release from 20 on.
#ifndef TEND_ADDON_H
#define TEND_ADDON_H

#define NAPI_VERSION 8
#include <node_api.h>
#include <stdbool.h>

/** daemon/peer/peer-credentials.c: who is on the other end of a unix socket. */
bool define_peer_credentials(napi_env env, napi_value part);
/** daemon/durable-write/durable-write.c: a file written whole and fsynced in one thread-pool job. */
bool define_durable_write(napi_env env, napi_value part);
/** daemon/memory/release-memory.c: malloc's free pages back to the kernel. */
bool define_memory_release(napi_env env, napi_value part);
/** daemon/lock/instance-flock.c: the instance lock's flock. */
bool define_instance_lock(napi_env env, napi_value part);
/** daemon/network/holder/holder-control.c: a network holder's control channel. */
bool define_holder_control(napi_env env, napi_value part);
/** daemon/network/relay/splice-relay.c: the egress proxy's relay threads. */
bool define_splice_relay(napi_env env, napi_value part);
/** daemon/service/sd-notify.c: a notification to the service manager (sd_notify). */
bool define_service_notify(napi_env env, napi_value part);

/** Defines `count` functions on `part`, each enumerable. */
bool define_functions(napi_env env, napi_value part, const napi_property_descriptor *functions, size_t count);

#endif
