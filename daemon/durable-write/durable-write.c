// A file written whole and on disk, in one job of libuv's thread pool: the record writer
// (daemon/store/record-writer.ts) hands it a temporary file's path and its bytes, and this addon
// makes the task's folder and empty output.log when asked, then opens, writes every byte, fsyncs
// and closes the file, without coming back to JavaScript in between. Node's own fs would make
// each of those calls its own trip through the pool and the event loop (seven or eight per
// record), and a worker thread that makes them costs the daemon a second V8 isolate (~11 MiB).
// The rename into place stays in JavaScript, which keeps a task's versions in order.
// A part of the addon daemon/native/addon.c.
#define _GNU_SOURCE
#include "../native/addon.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != napi_ok) return NULL;                                                            \
  } while (0)

typedef struct {
  napi_async_work work;
  napi_ref callback;
  // Owned copies: the pool thread may not touch JavaScript values.
  char *dir;         // NULL unless the folder and output.log are to be made first
  char *output_file; // as dir
  char *path;        // the temporary file
  char *bytes;
  size_t length;
  // The outcome: errno 0 when every step succeeded, else the first failure and its call.
  int error;
  const char *syscall;
  const char *error_path;
} Job;

static void fail(Job *job, const char *syscall, const char *path) {
  job->error = errno;
  job->syscall = syscall;
  job->error_path = path;
}

/** mkdir -p with mode 0700 for what it creates; an existing folder is fine. */
static int make_folder(Job *job) {
  char path[PATH_MAX];
  size_t length = strlen(job->dir);
  if (length == 0 || length >= sizeof path) {
    errno = ENAMETOOLONG;
    fail(job, "mkdir", job->dir);
    return -1;
  }
  memcpy(path, job->dir, length + 1);
  for (char *slash = strchr(path + 1, '/');; slash = strchr(slash + 1, '/')) {
    if (slash != NULL) *slash = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
      fail(job, "mkdir", job->dir);
      return -1;
    }
    if (slash == NULL) return 0;
    *slash = '/';
  }
}

/*
 * Opens (creating, 0600) a file in a task's spool folder for writing. A task under `off` can write
 * that folder and guess the names: a link is not followed, a FIFO not waited on (O_NONBLOCK), and
 * anything but a regular file with one name is refused (ENXIO) before a byte is written (a hard
 * link would have the daemon write a file of its own that the task linked in).
 */
static int open_regular(const char *path, int flags) {
  int fd;
  do fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | flags, 0600);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  struct stat info;
  int error = fstat(fd, &info) != 0 ? errno : S_ISREG(info.st_mode) && info.st_nlink <= 1 ? 0 : ENXIO;
  if (!error) return fd;
  close(fd);
  errno = error;
  return -1;
}

/* Tries at a temporary name that a task keeps planting things at, before the write is given up. */
#define FRESH_TRIES 3

/*
 * A new file made at the temporary name `path` by this very open (O_EXCL): whatever a task planted
 * at that guessable name is unlinked first, never emptied and written through.
 */
static int open_fresh(const char *path) {
  for (int tries = 1;; tries++) {
    if (unlink(path) != 0 && errno != ENOENT) return -1;
    int fd = open_regular(path, O_EXCL);
    if (fd >= 0 || errno != EEXIST || tries == FRESH_TRIES) return fd;
  }
}

static int close_checked(Job *job, int fd) {
  if (close(fd) == 0) return 0;
  fail(job, "close", job->path);
  return -1;
}

/** The pool thread's part: every call, in order; on a failure the temporary file goes. */
static void execute(napi_env env, void *data) {
  (void)env;
  Job *job = data;
  if (job->dir != NULL) {
    if (make_folder(job) != 0) return;
    // output.log exists from the start, so readers find an empty log rather than none.
    int log = open_regular(job->output_file, O_APPEND);
    if (log < 0) return fail(job, "open", job->output_file);
    if (close(log) != 0) return fail(job, "close", job->output_file);
  }
  int fd = open_fresh(job->path);
  if (fd < 0) return fail(job, "open", job->path);
  if (ftruncate(fd, 0) != 0) {
    fail(job, "ftruncate", job->path);
    close(fd);
    unlink(job->path);
    return;
  }
  size_t offset = 0;
  while (offset < job->length) {
    ssize_t written = write(fd, job->bytes + offset, job->length - offset);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      // write(2) answering 0 would loop for ever: a disk that takes nothing more is an I/O error.
      if (written == 0) errno = EIO;
      fail(job, "write", job->path);
      close(fd);
      unlink(job->path);
      return;
    }
    offset += (size_t)written;
  }
  if (fsync(fd) != 0) {
    fail(job, "fsync", job->path);
    close(fd);
    unlink(job->path);
    return;
  }
  if (close_checked(job, fd) != 0) unlink(job->path);
}

static void release(napi_env env, Job *job) {
  if (job->callback != NULL) napi_delete_reference(env, job->callback);
  if (job->work != NULL) napi_delete_async_work(env, job->work);
  free(job->dir);
  free(job->output_file);
  free(job->path);
  free(job->bytes);
  free(job);
}

/** Back on the daemon's thread: callback(null) or callback(errno, syscall, path). */
static void complete(napi_env env, napi_status status, void *data) {
  Job *job = data;
  napi_value callback, global, argv[3];
  size_t argc = 1;
  if (napi_get_reference_value(env, job->callback, &callback) == napi_ok && napi_get_global(env, &global) == napi_ok) {
    if (status == napi_cancelled) {
      job->error = ECANCELED;
      job->syscall = "write";
      job->error_path = job->path;
    }
    if (job->error == 0) {
      napi_get_null(env, &argv[0]);
    } else {
      argc = 3;
      napi_create_int32(env, job->error, &argv[0]);
      napi_create_string_utf8(env, job->syscall, NAPI_AUTO_LENGTH, &argv[1]);
      napi_create_string_utf8(env, job->error_path, NAPI_AUTO_LENGTH, &argv[2]);
    }
    napi_value ignored;
    napi_call_function(env, global, callback, argc, argv, &ignored);
  }
  release(env, job);
}

/** A JavaScript string as a malloc'd UTF-8 C string (its byte length in *out_length when asked), or NULL. */
static char *copy_string_sized(napi_env env, napi_value value, size_t *out_length) {
  size_t length;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) return NULL;
  char *copy = malloc(length + 1);
  if (copy == NULL) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  if (napi_get_value_string_utf8(env, value, copy, length + 1, &length) != napi_ok) {
    free(copy);
    return NULL;
  }
  if (out_length != NULL) *out_length = length;
  return copy;
}

static char *copy_string(napi_env env, napi_value value) {
  return copy_string_sized(env, value, NULL);
}

/**
 * writeFile(path, text, dir, outputFile, callback): text written as UTF-8; dir and outputFile strings, or
 * null to leave the folder alone. The callback gets null, or (errno, syscall, path).
 */
static napi_value write_file(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 5) {
    napi_throw_type_error(env, NULL, "writeFile(path, bytes, dir, outputFile, callback)");
    return NULL;
  }
  Job *job = calloc(1, sizeof *job);
  if (job == NULL) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  napi_valuetype dir_type;
  if ((job->path = copy_string(env, argv[0])) == NULL) goto failed;
  // The text, encoded straight into memory of the job's own (the pool thread may not touch it).
  if ((job->bytes = copy_string_sized(env, argv[1], &job->length)) == NULL) goto failed;
  if (napi_typeof(env, argv[2], &dir_type) != napi_ok) goto failed;
  if (dir_type != napi_null) {
    if ((job->dir = copy_string(env, argv[2])) == NULL) goto failed;
    if ((job->output_file = copy_string(env, argv[3])) == NULL) goto failed;
  }
  if (napi_create_reference(env, argv[4], 1, &job->callback) != napi_ok) goto failed;
  napi_value name;
  if (napi_create_string_utf8(env, "tend:durable-write", NAPI_AUTO_LENGTH, &name) != napi_ok) goto failed;
  if (napi_create_async_work(env, NULL, name, execute, complete, job, &job->work) != napi_ok) goto failed;
  if (napi_queue_async_work(env, job->work) != napi_ok) goto failed;
  return NULL;
failed: {
  // Arguments of the wrong kind fail without an exception of their own: throw one, never return quietly.
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_type_error(env, NULL, "writeFile(path: string, text: string, dir: string | null, outputFile: string | null, callback)");
  release(env, job);
  return NULL;
}
}

bool define_durable_write(napi_env env, napi_value part) {
  const napi_property_descriptor functions[] = {
      {"writeFile", NULL, write_file, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return define_functions(env, part, functions, sizeof functions / sizeof functions[0]);
}
