// notify(address, message): sends `message` as one datagram to the unix socket `address`, as
// sd_notify(3) does: a path, or an abstract name when it starts with "@". systemd checks who sent
// it by the kernel's credentials (NotifyAccess=main: the service's main pid), so it must leave from
// the daemon's own process; Node has no unix datagram sockets, hence this part. Throws with the
// address and errno's message when the address is not one or the send fails. The send does not
// block: systemd's socket is a datagram socket it drains, and a full queue is an error (EAGAIN),
// not a wait. A part of the addon daemon/native/addon.c.
#include "../native/addon.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define ADDRESS_MAX 4096
#define MESSAGE_MAX 4096

static napi_value fail(napi_env env, const char *address, const char *reason) {
  char text[ADDRESS_MAX + 256];
  snprintf(text, sizeof text, "%s: %s", address, reason);
  napi_throw_error(env, NULL, text);
  return NULL;
}

static napi_value notify(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  char address[ADDRESS_MAX];
  char message[MESSAGE_MAX];
  size_t address_length = 0;
  size_t message_length = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      napi_get_value_string_utf8(env, argv[0], address, sizeof address, &address_length) != napi_ok ||
      napi_get_value_string_utf8(env, argv[1], message, sizeof message, &message_length) != napi_ok) {
    napi_throw_type_error(env, NULL, "notify(address, message) takes two strings");
    return NULL;
  }
  if (address_length == 0 || (address[0] != '/' && address[0] != '@'))
    return fail(env, address, "a notification socket is an absolute path or an abstract name (@name)");
  struct sockaddr_un target = {.sun_family = AF_UNIX};
  if (address_length > sizeof target.sun_path - 1) return fail(env, address, "longer than a unix socket address can be");
  memcpy(target.sun_path, address, address_length);
  if (address[0] == '@') target.sun_path[0] = '\0';
  // An abstract name is exactly its bytes: no terminating NUL counted.
  socklen_t target_length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + address_length + (address[0] == '@' ? 0 : 1));

  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd == -1) return fail(env, address, strerror(errno));
  ssize_t sent;
  do {
    sent = sendto(fd, message, message_length, MSG_NOSIGNAL, (const struct sockaddr *)&target, target_length);
  } while (sent == -1 && errno == EINTR);
  int error = errno;
  close(fd);
  if (sent == -1) return fail(env, address, strerror(error));
  return NULL;
}

bool define_service_notify(napi_env env, napi_value part) {
  const napi_property_descriptor functions[] = {
      {"notify", NULL, notify, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return define_functions(env, part, functions, sizeof functions / sizeof functions[0]);
}
