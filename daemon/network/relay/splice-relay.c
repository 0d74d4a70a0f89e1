// The egress proxy's byte path: once a connection is decided, its two sockets are relayed by a
// thread of this addon with splice(2) through a pipe each way, so the bytes cross from one socket
// to the other inside the kernel, never copied through JavaScript (which cost the proxy half the
// speed of a direct download). A part of the addon daemon/native/addon.c.
//
// relay(clientFd, upstreamFd, idleMs, done) -> handle. Both descriptors are duplicated (the
// caller then closes its own); the thread relays until both directions have ended (each end's EOF
// is passed on as a shutdown of the other's writing side, so a half-closed exchange finishes),
// either socket fails, nothing has moved for idleMs, or stop(handle) is called (its task ended),
// then closes them and calls done(sentBytes, receivedBytes, error) on the main thread: sent is
// client -> upstream, received upstream -> client; error is "" or the errno text. A handle is good
// until done has been called: it is closed there, on the main thread, where stop() runs, so that
// stop() never writes to a descriptor reused meanwhile.
#define _GNU_SOURCE
#include "../../native/addon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != napi_ok) return NULL;                                                            \
  } while (0)

/* What a pipe holds at most. The sockets keep the kernel's own buffer sizes (autotuned, and shrunk
 * under memory pressure): fixed large ones would let a task that never reads pin the host's TCP
 * memory, a few MiB per connection. */
#define PIPE_BYTES (256 * 1024)

struct direction {
  int from, to;
  int pipe[2];
  size_t buffered;
  int eof, done;
  uint64_t bytes;
};

struct relay {
  struct direction up, down; /* up: client -> upstream; down: upstream -> client */
  int client, upstream, stop;
  int idle_ms;
  int error;
  napi_threadsafe_function done;
};

static napi_value throw_errno(napi_env env, const char *what, int error) {
  char message[160];
  snprintf(message, sizeof message, "%s: %s", what, strerror(error));
  napi_throw_error(env, NULL, message);
  return NULL;
}

/*
 * Moves what it can: source -> pipe, pipe -> destination. Returns -1 (errno set) on a failure, else
 * whether anything moved (or ended).
 */
static int step(struct direction *d, short from_events, short to_events) {
  int moved = 0;
  if (!d->eof && d->buffered < PIPE_BYTES && (from_events & (POLLIN | POLLHUP | POLLERR))) {
    ssize_t got = splice(d->from, NULL, d->pipe[1], NULL, PIPE_BYTES - d->buffered, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (got > 0) {
      d->buffered += (size_t)got;
      moved = 1;
    } else if (got == 0) {
      d->eof = 1;
      moved = 1;
    }
    else if (errno != EAGAIN && errno != EINTR) return -1;
  }
  if (d->buffered > 0 && (to_events & (POLLOUT | POLLERR))) {
    ssize_t put = splice(d->pipe[0], NULL, d->to, NULL, d->buffered, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (put > 0) {
      d->buffered -= (size_t)put;
      d->bytes += (uint64_t)put;
      moved = 1;
    } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
      return -1;
    }
  }
  if (d->eof && d->buffered == 0 && !d->done) {
    d->done = 1;
    /* The other side learns the end; it may still answer (half-close). */
    shutdown(d->to, SHUT_WR);
  }
  return moved;
}

static long long now_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static void *run(void *argument) {
  struct relay *r = argument;
  long long last_moved = now_ms();
  uint64_t moved_before = 0;
  while (!(r->up.done && r->down.done)) {
    uint64_t moved = r->up.bytes + r->down.bytes;
    if (moved != moved_before) {
      moved_before = moved;
      last_moved = now_ms();
    }
    long long left = last_moved + r->idle_ms - now_ms();
    if (left <= 0) {
      r->error = ETIMEDOUT;
      break;
    }
    struct pollfd fds[3] = {
        {.fd = r->client, .events = (short)((!r->up.eof && r->up.buffered < PIPE_BYTES ? POLLIN : 0) | (r->down.buffered > 0 ? POLLOUT : 0))},
        {.fd = r->upstream, .events = (short)((!r->down.eof && r->down.buffered < PIPE_BYTES ? POLLIN : 0) | (r->up.buffered > 0 ? POLLOUT : 0))},
        {.fd = r->stop, .events = POLLIN},
    };
    /* A socket with nothing left to do here (its end read, nothing queued for it) is left out: a
     * socket shut both ways reports POLLHUP at every poll, and the loop would spin on it while
     * the other side's reader is slow. */
    for (int i = 0; i < 2; i++)
      if (fds[i].events == 0) fds[i].fd = -1;
    if (poll(fds, 3, left > 60000 ? 60000 : (int)left) < 0) {
      if (errno == EINTR) continue;
      r->error = errno;
      break;
    }
    if (fds[2].revents) {
      r->error = ECANCELED;
      break;
    }
    /* A reset socket, or one closed both ways after its end was read: nothing more can cross. */
    if ((fds[0].revents | fds[1].revents) & POLLERR) {
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt((fds[0].revents & POLLERR) ? r->client : r->upstream, SOL_SOCKET, SO_ERROR, &error, &length);
      r->error = error ? error : ECONNRESET;
      break;
    }
    if (((fds[0].revents & POLLHUP) && r->up.eof && r->up.buffered == 0) || ((fds[1].revents & POLLHUP) && r->down.eof && r->down.buffered == 0)) {
      /* Drain what is already on its way, then end. */
      step(&r->up, fds[0].revents, fds[1].revents);
      step(&r->down, fds[1].revents, fds[0].revents);
      break;
    }
    int up = step(&r->up, fds[0].revents, fds[1].revents);
    int down = up < 0 ? 0 : step(&r->down, fds[1].revents, fds[0].revents);
    if (up < 0 || down < 0) {
      r->error = errno;
      break;
    }
  }
  close(r->up.pipe[0]);
  close(r->up.pipe[1]);
  close(r->down.pipe[0]);
  close(r->down.pipe[1]);
  close(r->client);
  close(r->upstream);
  napi_call_threadsafe_function(r->done, r, napi_tsfn_blocking);
  napi_release_threadsafe_function(r->done, napi_tsfn_release);
  return NULL;
}

/* On the main thread: the counts, to the caller's done; the stop descriptor is closed here. */
static void call_done(napi_env env, napi_value callback, void *context, void *data) {
  (void)context;
  struct relay *r = data;
  close(r->stop);
  if (env != NULL && callback != NULL) {
    napi_value args[3], global;
    if (napi_create_double(env, (double)r->up.bytes, &args[0]) == napi_ok && napi_create_double(env, (double)r->down.bytes, &args[1]) == napi_ok &&
        napi_create_string_utf8(env, r->error ? strerror(r->error) : "", NAPI_AUTO_LENGTH, &args[2]) == napi_ok && napi_get_global(env, &global) == napi_ok) {
      napi_call_function(env, global, callback, 3, args, NULL);
    }
  }
  free(r);
}

static int open_pipe(int ends[2]) {
  if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  fcntl(ends[1], F_SETPIPE_SZ, PIPE_BYTES);
  return 0;
}

static napi_value relay(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value args[4];
  CHECK(napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  int32_t client, upstream, idle_ms;
  if (argc != 4 || napi_get_value_int32(env, args[0], &client) != napi_ok || napi_get_value_int32(env, args[1], &upstream) != napi_ok ||
      napi_get_value_int32(env, args[2], &idle_ms) != napi_ok || idle_ms <= 0) {
    napi_throw_type_error(env, NULL, "relay(clientFd, upstreamFd, idleMs, done)");
    return NULL;
  }
  struct relay *r = calloc(1, sizeof *r);
  if (!r) return throw_errno(env, "relay", ENOMEM);
  r->client = fcntl(client, F_DUPFD_CLOEXEC, 3);
  r->upstream = fcntl(upstream, F_DUPFD_CLOEXEC, 3);
  r->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  r->idle_ms = idle_ms;
  r->up.pipe[0] = r->up.pipe[1] = r->down.pipe[0] = r->down.pipe[1] = -1;
  int error = 0;
  if (r->client < 0 || r->upstream < 0 || r->stop < 0 || open_pipe(r->up.pipe) != 0 || open_pipe(r->down.pipe) != 0) error = errno;
  napi_value name;
  if (!error && (napi_create_string_utf8(env, "tend-splice-relay", NAPI_AUTO_LENGTH, &name) != napi_ok ||
                 napi_create_threadsafe_function(env, args[3], NULL, name, 0, 1, NULL, NULL, NULL, call_done, &r->done) != napi_ok)) {
    error = EINVAL;
  }
  if (!error) {
    /* The descriptors are the daemon's; each socket is non-blocking on both copies (one description). */
    fcntl(r->client, F_SETFL, fcntl(r->client, F_GETFL) | O_NONBLOCK);
    fcntl(r->upstream, F_SETFL, fcntl(r->upstream, F_GETFL) | O_NONBLOCK);

    r->up.from = r->client;
    r->up.to = r->upstream;
    r->down.from = r->upstream;
    r->down.to = r->client;
    napi_unref_threadsafe_function(env, r->done);
    pthread_attr_t attributes;
    pthread_t thread;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, 64 * 1024);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    error = pthread_create(&thread, &attributes, run, r);
    pthread_attr_destroy(&attributes);
    if (error) napi_release_threadsafe_function(r->done, napi_tsfn_abort);
  }
  if (error) {
    int fds[] = {r->client, r->upstream, r->stop, r->up.pipe[0], r->up.pipe[1], r->down.pipe[0], r->down.pipe[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
      if (fds[i] >= 0) close(fds[i]);
    free(r);
    return throw_errno(env, "relay", error);
  }
  napi_value handle;
  CHECK(napi_create_int32(env, r->stop, &handle));
  return handle;
}

/* Ends a relay early; only for a handle whose done has not been called (the caller keeps to that). */
static napi_value stop(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value args[1];
  int32_t handle;
  CHECK(napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  if (argc != 1 || napi_get_value_int32(env, args[0], &handle) != napi_ok) {
    napi_throw_type_error(env, NULL, "stop(handle)");
    return NULL;
  }
  uint64_t one = 1;
  ssize_t wrote = write(handle, &one, sizeof one);
  (void)wrote;
  return NULL;
}

bool define_splice_relay(napi_env env, napi_value part) {
  const napi_property_descriptor functions[] = {
      {"relay", NULL, relay, NULL, NULL, NULL, napi_enumerable, NULL},
      {"stop", NULL, stop, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return define_functions(env, part, functions, sizeof functions / sizeof functions[0]);
}
