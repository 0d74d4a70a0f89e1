// The daemon's side of a network holder's control channel (tend-netns.c): a SOCK_SEQPACKET pair,
// and one request answered by one reply that may carry a descriptor (SCM_RIGHTS). Node can neither
// make such a pair nor receive a descriptor outside its own IPC, hence this part of
// the addon daemon/native/addon.c.
//
// pair() -> [daemonEnd, holderEnd], both close-on-exec (the spawn of the holder dups its end onto
// descriptor 3, which clears the flag there only).
// exchange(fd, text, timeoutMs) -> { reply, fd } sends text (none when empty), then waits up to
// timeoutMs for the reply; fd is -1 when it carried none. The holder answers in microseconds (it
// makes one socket), so the wait is synchronous.
#define _GNU_SOURCE
#include "../../native/addon.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != napi_ok) return NULL;                                                            \
  } while (0)

static napi_value throw_errno(napi_env env, const char *what, int error) {
  char message[160];
  snprintf(message, sizeof message, "%s: %s", what, strerror(error));
  napi_value text, object, code;
  CHECK(napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &text));
  CHECK(napi_create_error(env, NULL, text, &object));
  CHECK(napi_create_int32(env, error, &code));
  CHECK(napi_set_named_property(env, object, "errno", code));
  napi_throw(env, object);
  return NULL;
}

static napi_value pair(napi_env env, napi_callback_info info) {
  (void)info;
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) return throw_errno(env, "socketpair", errno);
  napi_value result, value;
  CHECK(napi_create_array_with_length(env, 2, &result));
  for (uint32_t i = 0; i < 2; i++) {
    CHECK(napi_create_int32(env, ends[i], &value));
    CHECK(napi_set_element(env, result, i, value));
  }
  return result;
}

static napi_value exchange(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  CHECK(napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  if (argc != 3) {
    napi_throw_type_error(env, NULL, "exchange(fd, text, timeoutMs)");
    return NULL;
  }
  int32_t fd, timeout;
  char text[256];
  size_t length;
  CHECK(napi_get_value_int32(env, args[0], &fd));
  CHECK(napi_get_value_string_utf8(env, args[1], text, sizeof text, &length));
  CHECK(napi_get_value_int32(env, args[2], &timeout));
  if (length > 0) {
    ssize_t sent;
    do sent = send(fd, text, length, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent < 0) return throw_errno(env, "send", errno);
  }
  struct pollfd wait = {.fd = fd, .events = POLLIN};
  int ready;
  do ready = poll(&wait, 1, timeout);
  while (ready < 0 && errno == EINTR);
  if (ready < 0) return throw_errno(env, "poll", errno);
  if (ready == 0) return throw_errno(env, "the network holder did not answer", ETIMEDOUT);
  char reply[256];
  char space[CMSG_SPACE(sizeof(int))];
  struct iovec part = {reply, sizeof reply - 1};
  struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = space, .msg_controllen = sizeof space};
  ssize_t got;
  do got = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
  while (got < 0 && errno == EINTR);
  if (got < 0) return throw_errno(env, "recvmsg", errno);
  if (got == 0) return throw_errno(env, "the network holder is gone", EPIPE);
  reply[got] = 0;
  int received = -1;
  for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS && header->cmsg_len >= CMSG_LEN(sizeof(int))) memcpy(&received, CMSG_DATA(header), sizeof(int));
  }
  napi_value result, value;
  CHECK(napi_create_object(env, &result));
  CHECK(napi_create_string_utf8(env, reply, (size_t)got, &value));
  CHECK(napi_set_named_property(env, result, "reply", value));
  CHECK(napi_create_int32(env, received, &value));
  CHECK(napi_set_named_property(env, result, "fd", value));
  return result;
}

bool define_holder_control(napi_env env, napi_value part) {
  const napi_property_descriptor functions[] = {
      {"pair", NULL, pair, NULL, NULL, NULL, napi_enumerable, NULL},
      {"exchange", NULL, exchange, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return define_functions(env, part, functions, sizeof functions / sizeof functions[0]);
}
