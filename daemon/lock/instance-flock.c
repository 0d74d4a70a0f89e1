// lockExclusive(fd): flock(fd, LOCK_EX | LOCK_NB) on a descriptor the daemon opened. Answers true
// when this open file description now holds the lock, false when another one holds it
// (EWOULDBLOCK); any other failure throws with its errno's message. The lock belongs to the open file
// description, so the kernel frees it when the daemon's last descriptor on it closes: at its exit,
// however it ends. flock is never interrupted into a partial state, but a signal can still make
// it fail with EINTR before it ran: it is then tried again. A part of the addon daemon/native/addon.c.
#include "../native/addon.h"

#include <errno.h>
#include <string.h>
#include <sys/file.h>

static napi_value fail(napi_env env, int error) {
  napi_throw_error(env, NULL, strerror(error));
  return NULL;
}

static napi_value lock_exclusive(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return fail(env, EINVAL);
  if (napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) return fail(env, EBADF);
  int result;
  do {
    result = flock(fd, LOCK_EX | LOCK_NB);
  } while (result == -1 && errno == EINTR);
  if (result == -1 && errno != EWOULDBLOCK) return fail(env, errno);
  napi_value answer;
  if (napi_get_boolean(env, result == 0, &answer) != napi_ok) return NULL;
  return answer;
}

bool define_instance_lock(napi_env env, napi_value part) {
  const napi_property_descriptor functions[] = {
      {"lockExclusive", NULL, lock_exclusive, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return define_functions(env, part, functions, sizeof functions / sizeof functions[0]);
}
