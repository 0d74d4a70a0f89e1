/*
 * tend-spawner: the daemon's native spawner. A tiny long-lived helper that the daemon starts once
 * (see daemon/native-spawner.ts) and sends spawn requests to over its stdin. It forks from its own
 * small address space (cheap, unlike forking the ~100 MiB daemon), sets the child up, execs it,
 * reaps its children and reports their exits on stdout. Single-threaded: poll() on stdin, on a
 * signalfd for SIGCHLD and on the error pipe of every child that has not exec'd yet, so several
 * children can be exec'ing at once while the helper already forks the next.
 *
 * Usage: tend-spawner [<parent-pid>]   (with the pid, the helper exits at once if its parent is
 * already gone; in any case it gets SIGKILL when its parent dies.)
 *
 * Wire protocol
 * -------------
 * Requests (stdin): a 4-byte little-endian payload length, then the payload, a sequence of
 * NUL-terminated strings:
 *   reqid, file, cwd, outputFile, openFiles, fileSizeBytes, cwdDev, cwdIno, uid, gid,
 *   argc, argv[0..argc-1], envc, env[...] ("K=V"), extrac, extraFiles[...], cgc, cgroupProcs[...],
 *   pinc, then pinc triples (path, dev, ino),
 *   datac, then datac blobs, each a length string and then exactly that many raw bytes (no NUL).
 * Numbers are decimal. cwdDev and cwdIno are both empty (do not check cwd's identity) or both
 * given; uid and gid likewise (empty: keep the helper's user). reqid is 1..63 printable
 * characters without spaces. At most 1024 extra files, blobs and pinned folders together.
 *
 * Replies (stdout), one line each, space-separated:
 *   started <reqid> <pid>                    the child has exec'd
 *   failed <reqid> <stage> <errno> [<index>] nothing is left running; stage is one of output,
 *                                            stdin, extra, data, pinned, cgroup, limits, setsid,
 *                                            chdir, user, exec, fork. For the stages extra, data,
 *                                            pinned and cgroup a 5th field gives the 0-based index
 *                                            of the entry that failed (in extraFiles, the blobs,
 *                                            the pinned folders or cgroupProcs), so the daemon can
 *                                            name it. A pinned folder that is no longer the same
 *                                            directory, or a cwd that is not, reads ESTALE.
 *   exited <pid> <code> <signal>             code is -1 when a signal ended it, signal 0 when it
 *                                            exited. Always after the `started` of that pid; the
 *                                            exits of children that failed are never reported.
 *   error <message>                          malformed request; the helper then exits 2.
 * On stdin EOF the helper reports the spawns it already forked, then exits 0 without touching its
 * children.
 *
 * Child setup, in order: signal dispositions to SIG_DFL and an empty mask; setsid(); limits
 * (RLIMIT_CORE 0, RLIMIT_NOFILE and RLIMIT_FSIZE soft = hard = the request's); the pid written to
 * each cgroupProcs file; descriptors: stdin /dev/null, stdout and stderr one O_APPEND description
 * of outputFile (created 0600), then from fd 3 the extra files (read-only), the blobs (each a
 * sealed memfd reopened read-only, at offset 0) and the pinned folders (O_PATH, opened by openat2
 * with RESOLVE_NO_SYMLINKS and checked against their device and inode), every other descriptor
 * closed; chdir(cwd) (fchdir through the pinned descriptor when cwd is a pinned folder), then `.`
 * checked against cwdDev/cwdIno; for another user keep-caps off, setgroups(0), setgid(gid),
 * setuid(uid), and setuid(0) must then fail; execve(file, argv, env); a file without a slash is
 * searched on the PATH of env (execvpe). openat2 needs Linux 5.6. A failing step writes
 * "<stage> <errno>[ <index>]" to an O_CLOEXEC pipe and _exits; EOF with no data on that pipe means
 * the exec succeeded.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAX_PAYLOAD (64u * 1024u * 1024u)
#define READ_CHUNK (64u * 1024u)
#define MAX_REQID 63

/* ---------------------------------------------------------------- output */

static char *out_buf;
static size_t out_len, out_cap;

static void *xrealloc(void *pointer, size_t size) {
  void *grown = realloc(pointer, size);
  if (!grown) {
    static const char message[] = "tend-spawner: out of memory\n";
    ssize_t ignored = write(2, message, sizeof message - 1);
    (void)ignored;
    _exit(3);
  }
  return grown;
}

__attribute__((format(printf, 1, 2))) static void out_printf(const char *format, ...) {
  for (;;) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(out_buf + out_len, out_cap - out_len, format, args);
    va_end(args);
    if (n < 0) return;
    if ((size_t)n < out_cap - out_len) {
      out_len += (size_t)n;
      return;
    }
    out_cap = out_cap * 2 + (size_t)n + 256;
    out_buf = xrealloc(out_buf, out_cap);
  }
}

/* Writes everything buffered to stdout, handling partial writes, EINTR and a non-blocking pipe. */
static void out_flush(void) {
  size_t done = 0;
  while (done < out_len) {
    ssize_t n = write(1, out_buf + done, out_len - done);
    if (n > 0) {
      done += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd writable = {.fd = 1, .events = POLLOUT};
      if (poll(&writable, 1, -1) < 0 && errno != EINTR) _exit(1);
    } else {
      _exit(1); /* the daemon is gone (EPIPE) or stdout is broken: nobody to report to */
    }
  }
  out_len = 0;
}

__attribute__((noreturn, format(printf, 1, 2))) static void malformed(const char *format, ...) {
  char message[256];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  out_printf("error %s\n", message);
  out_flush();
  exit(2);
}

/* --------------------------------------------------------------- children */

/* A child that has not exec'd yet (fd = read end of its error pipe), or that failed and is only
 * waiting to be reaped silently (fd = -1). Running children are not tracked: every other reaped
 * pid is a started child whose exit gets reported. */
struct pending {
  pid_t pid;
  int fd;
  char reqid[MAX_REQID + 1];
};

static struct pending *pending;
static size_t pending_count, pending_cap;

static ssize_t find_pending_by_pid(pid_t pid) {
  for (size_t i = 0; i < pending_count; i++)
    if (pending[i].pid == pid) return (ssize_t)i;
  return -1;
}

static ssize_t find_pending_by_fd(int fd) {
  for (size_t i = 0; i < pending_count; i++)
    if (pending[i].fd == fd) return (ssize_t)i;
  return -1;
}

static void remove_pending(size_t index) {
  if (pending[index].fd >= 0) close(pending[index].fd);
  pending[index] = pending[--pending_count];
}

/* The error pipe said something (or EOF): report started or failed. Returns 1 when started. */
static int settle(size_t index, const char *data, ssize_t length) {
  struct pending *entry = &pending[index];
  if (length <= 0) {
    out_printf("started %s %d\n", entry->reqid, (int)entry->pid);
    return 1;
  }
  /* The child's message is "<stage> <errno>[ <index>]": pass it through, minus anything odd. */
  char clean[64];
  size_t used = 0;
  for (ssize_t i = 0; i < length && used < sizeof clean - 1; i++) {
    char c = data[i];
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ' ') clean[used++] = c;
  }
  clean[used] = 0;
  out_printf("failed %s %s\n", entry->reqid, used ? clean : "exec 5");
  return 0;
}

/* Reads a pending child's error pipe after poll() said it is ready (or after the child died). */
static int read_error_pipe(size_t index, int until_eof) {
  char data[64];
  ssize_t total = 0;
  for (;;) {
    ssize_t n = read(pending[index].fd, data + total, sizeof data - (size_t)total);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) n = 0; /* treat a broken pipe like EOF */
    total += n;
    if (n == 0 || !until_eof || total == (ssize_t)sizeof data) break;
  }
  return settle(index, data, total);
}

static void on_error_pipe_ready(int fd) {
  ssize_t index = find_pending_by_fd(fd);
  if (index < 0) return;
  if (read_error_pipe((size_t)index, 0)) {
    remove_pending((size_t)index); /* running: no longer tracked */
  } else {
    close(pending[index].fd); /* failed: reap it silently */
    pending[index].fd = -1;
  }
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    ssize_t index = find_pending_by_pid(pid);
    if (index >= 0) {
      /* Dead before we saw its error pipe settle: the pipe is at EOF now, so this cannot block. */
      int started = pending[index].fd >= 0 && read_error_pipe((size_t)index, 1);
      remove_pending((size_t)index);
      if (!started) continue;
    }
    if (WIFEXITED(status))
      out_printf("exited %d %d 0\n", (int)pid, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
      out_printf("exited %d -1 %d\n", (int)pid, WTERMSIG(status));
  }
}

/* ---------------------------------------------------------------- requests */

/* A blob points into the request's payload: raw bytes, NULs allowed. */
struct blob {
  const char *bytes;
  size_t length;
};

struct pin {
  const char *path;
  unsigned long long dev, ino;
};

struct request {
  const char *reqid, *file, *cwd, *output;
  unsigned long long open_files, file_size;
  int check_cwd, set_user;
  unsigned long long cwd_dev, cwd_ino, uid, gid;
  size_t argc, envc, extrac, cgc, pinc, datac;
  char **argv, **envp, **extra, **cgroups;
  struct pin *pins;
  struct blob *data;
  int *fds; /* the child's descriptors for extra, data, pinned, before they move to fd 3... */
};

struct cursor {
  char *at, *end;
};

static char *next_string(struct cursor *cursor, const char *what) {
  if (cursor->at >= cursor->end) malformed("truncated request: %s is missing", what);
  char *start = cursor->at;
  char *nul = memchr(start, 0, (size_t)(cursor->end - start));
  if (!nul) malformed("truncated request: %s is not NUL-terminated", what);
  cursor->at = nul + 1;
  return start;
}

static unsigned long long parse_number(const char *text, const char *what, unsigned long long max) {
  if (!*text) malformed("%s is empty", what);
  unsigned long long value = 0;
  for (const char *c = text; *c; c++) {
    if (*c < '0' || *c > '9') malformed("%s is not a decimal number", what);
    unsigned digit = (unsigned)(*c - '0');
    if (value > (max - digit) / 10) malformed("%s is too large", what);
    value = value * 10 + digit;
  }
  return value;
}

static unsigned long long next_number(struct cursor *cursor, const char *what, unsigned long long max) {
  return parse_number(next_string(cursor, what), what, max);
}

/* Two numbers that are both empty (returns 0) or both given (returns 1). */
static int next_optional_pair(struct cursor *cursor, const char *what, unsigned long long max, unsigned long long *first, unsigned long long *second) {
  const char *a = next_string(cursor, what), *b = next_string(cursor, what);
  if (!*a && !*b) return 0;
  *first = parse_number(a, what, max);
  *second = parse_number(b, what, max);
  return 1;
}

/* A count of strings: each takes at least one byte, so it cannot exceed what is left. */
static size_t next_count(struct cursor *cursor, const char *what) {
  return (size_t)next_number(cursor, what, (unsigned long long)(cursor->end - cursor->at));
}

static struct blob next_blob(struct cursor *cursor) {
  size_t length = (size_t)next_number(cursor, "data length", MAX_PAYLOAD);
  if (length > (size_t)(cursor->end - cursor->at)) malformed("truncated request: a blob is shorter than its length");
  struct blob blob = {cursor->at, length};
  cursor->at += length;
  return blob;
}

static void parse_request(char *payload, size_t length, struct request *request, void **allocation) {
  struct cursor cursor = {payload, payload + length};
  request->reqid = next_string(&cursor, "reqid");
  size_t reqid_length = strlen(request->reqid);
  if (reqid_length == 0 || reqid_length > MAX_REQID) malformed("reqid must be 1 to %d characters", MAX_REQID);
  for (const char *c = request->reqid; *c; c++)
    if (*c <= ' ' || *c > '~') malformed("reqid has a space or a control character");
  request->file = next_string(&cursor, "file");
  request->cwd = next_string(&cursor, "cwd");
  request->output = next_string(&cursor, "outputFile");
  request->open_files = next_number(&cursor, "openFiles", RLIM_INFINITY);
  request->file_size = next_number(&cursor, "fileSizeBytes", RLIM_INFINITY);
  request->check_cwd = next_optional_pair(&cursor, "cwd identity", ~0ULL, &request->cwd_dev, &request->cwd_ino);
  /* (uid_t)-1 means "unchanged" to setuid: never a user to run as. */
  request->set_user = next_optional_pair(&cursor, "user", 0xfffffffeULL, &request->uid, &request->gid);

  /* The counts come before their entries: parse in two passes into one allocation. */
  struct cursor scan = cursor;
  size_t argc = next_count(&scan, "argc");
  for (size_t i = 0; i < argc; i++) next_string(&scan, "argv");
  size_t envc = next_count(&scan, "envc");
  for (size_t i = 0; i < envc; i++) next_string(&scan, "env");
  size_t extrac = next_count(&scan, "extrac");
  for (size_t i = 0; i < extrac; i++) next_string(&scan, "extraFiles");
  size_t cgc = next_count(&scan, "cgc");
  for (size_t i = 0; i < cgc; i++) next_string(&scan, "cgroupProcs");
  size_t pinc = next_count(&scan, "pinc");
  for (size_t i = 0; i < 3 * pinc; i++) next_string(&scan, "pinned folder");
  size_t datac = next_count(&scan, "datac");
  for (size_t i = 0; i < datac; i++) next_blob(&scan);
  if (scan.at != scan.end) malformed("request has %zu trailing bytes", (size_t)(scan.end - scan.at));
  if (extrac + pinc + datac > 1024) malformed("too many extra files, blobs and pinned folders");

  /* Pointers first, then the structs, then the ints: each part stays aligned. */
  size_t pointers = (argc + 1) + (envc + 1) + extrac + cgc;
  size_t slots = extrac + datac + pinc;
  char **table = xrealloc(NULL, pointers * sizeof(char *) + pinc * sizeof(struct pin) + datac * sizeof(struct blob) + slots * sizeof(int) + 1);
  *allocation = table;
  request->argc = argc;
  request->envc = envc;
  request->extrac = extrac;
  request->cgc = cgc;
  request->pinc = pinc;
  request->datac = datac;
  request->argv = table;
  request->envp = request->argv + argc + 1;
  request->extra = request->envp + envc + 1;
  request->cgroups = request->extra + extrac;
  request->pins = (struct pin *)(void *)(request->cgroups + cgc);
  request->data = (struct blob *)(void *)(request->pins + pinc);
  request->fds = (int *)(void *)(request->data + datac);

  next_string(&cursor, "argc");
  for (size_t i = 0; i < argc; i++) request->argv[i] = next_string(&cursor, "argv");
  request->argv[argc] = NULL;
  next_string(&cursor, "envc");
  for (size_t i = 0; i < envc; i++) request->envp[i] = next_string(&cursor, "env");
  request->envp[envc] = NULL;
  next_string(&cursor, "extrac");
  for (size_t i = 0; i < extrac; i++) request->extra[i] = next_string(&cursor, "extraFiles");
  next_string(&cursor, "cgc");
  for (size_t i = 0; i < cgc; i++) request->cgroups[i] = next_string(&cursor, "cgroupProcs");
  next_string(&cursor, "pinc");
  for (size_t i = 0; i < pinc; i++) {
    request->pins[i].path = next_string(&cursor, "pinned path");
    if (request->pins[i].path[0] != '/') malformed("pinned path is not absolute");
    request->pins[i].dev = next_number(&cursor, "pinned dev", ~0ULL);
    request->pins[i].ino = next_number(&cursor, "pinned ino", ~0ULL);
  }
  next_string(&cursor, "datac");
  for (size_t i = 0; i < datac; i++) request->data[i] = next_blob(&cursor);
}

/* ------------------------------------------------------------------ child */

static int error_fd;

__attribute__((noreturn)) static void child_fail(const char *stage, int error, long index) {
  char message[64];
  int n = index >= 0 ? snprintf(message, sizeof message, "%s %d %ld", stage, error, index)
                     : snprintf(message, sizeof message, "%s %d", stage, error);
  while (write(error_fd, message, (size_t)n) < 0 && errno == EINTR) {
  }
  _exit(127);
}

static void close_from(int low, int keep, int highest_known) {
#ifdef SYS_close_range
  int ok = 1;
  if (keep >= low) {
    if (keep > low && syscall(SYS_close_range, (unsigned)low, (unsigned)keep - 1, 0u) != 0) ok = 0;
    if (ok && syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u) != 0) ok = 0;
  } else if (syscall(SYS_close_range, (unsigned)low, ~0u, 0u) != 0) {
    ok = 0;
  }
  if (ok) return;
#endif
  /* No close_range (kernel < 5.9): every descriptor the helper opens is below highest_known
   * and O_CLOEXEC anyway. */
  for (int fd = low; fd <= highest_known; fd++)
    if (fd != keep) close(fd);
}

/* Moves fd to the lowest free descriptor >= low (O_CLOEXEC), so the dup2s cannot collide. */
static int move_above(int fd, int low) {
  if (fd < 0 || fd >= low) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, low);
  int error = errno;
  close(fd);
  errno = error;
  return moved;
}

static int open_retrying(const char *path, int flags, mode_t mode) {
  int fd;
  do fd = open(path, flags | O_CLOEXEC | O_NOCTTY, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

/* A blob as a sealed memory file, reopened read-only through /proc (a new description, at offset 0). */
static int open_blob(const struct blob *blob) {
  int memfd = memfd_create("tend-data", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) return -1;
  int error = 0;
  for (size_t done = 0; done < blob->length && !error;) {
    ssize_t n = write(memfd, blob->bytes + done, blob->length - done);
    if (n > 0) done += (size_t)n;
    else if (n == 0) error = EIO;
    else if (errno != EINTR) error = errno;
  }
  if (!error && fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) error = errno;
  int readonly = -1;
  if (!error) {
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    readonly = open_retrying(path, O_RDONLY, 0);
    if (readonly < 0) error = errno;
  }
  close(memfd);
  errno = error;
  return readonly;
}

/* A pinned folder, opened without following any symbolic link; ESTALE when it is another one. */
static int open_pinned(const struct pin *pin) {
  struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
  int fd;
  do fd = (int)syscall(SYS_openat2, AT_FDCWD, pin->path, &how, sizeof how);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  struct stat info;
  int error = 0;
  if (fstat(fd, &info) != 0) error = errno;
  else if ((unsigned long long)info.st_dev != pin->dev || (unsigned long long)info.st_ino != pin->ino) error = ESTALE;
  if (!error) return fd;
  close(fd);
  errno = error;
  return -1;
}

__attribute__((noreturn)) static void run_child(struct request *r, int highest_known) {
  /* Hygiene first: drop everything of the helper's but stdio and the error pipe, so the opens
   * below get low descriptors (the task's RLIMIT_NOFILE may be smaller than the helper's table). */
  close_from(3, error_fd, highest_known);

  /* 1. Default signal dispositions, empty mask (the helper blocks SIGCHLD and ignores SIGPIPE). */
  struct sigaction default_action;
  memset(&default_action, 0, sizeof default_action);
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &default_action, NULL); /* EINVAL for KILL, STOP, glibc's own: fine */
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, NULL);

  /* 2. A new session (and process group). */
  if (setsid() < 0) child_fail("setsid", errno, -1);

  /* 3. Limits. */
  struct rlimit core = {0, 0};
  struct rlimit files = {(rlim_t)r->open_files, (rlim_t)r->open_files};
  struct rlimit fsize = {(rlim_t)r->file_size, (rlim_t)r->file_size};
  if (setrlimit(RLIMIT_CORE, &core) != 0) child_fail("limits", errno, -1);
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) child_fail("limits", errno, -1);
  if (setrlimit(RLIMIT_FSIZE, &fsize) != 0) child_fail("limits", errno, -1);

  /* 4. Join the cgroups: our pid into each cgroup.procs. */
  char pid_text[24];
  int pid_length = snprintf(pid_text, sizeof pid_text, "%d\n", (int)getpid());
  for (size_t i = 0; i < r->cgc; i++) {
    int fd = open_retrying(r->cgroups[i], O_WRONLY, 0);
    if (fd < 0) child_fail("cgroup", errno, (long)i);
    ssize_t written;
    do written = write(fd, pid_text, (size_t)pid_length);
    while (written < 0 && errno == EINTR);
    if (written < 0) child_fail("cgroup", errno, (long)i);
    if (written != pid_length) child_fail("cgroup", EIO, (long)i);
    close(fd);
  }

  /* 5. Descriptors: open everything above the target range 0 .. 3+slots-1, then dup2 down. The
   * slots are the extra files, then the blobs, then the pinned folders. */
  size_t slots = r->extrac + r->datac + r->pinc;
  int low = 3 + (int)slots;
  int moved = move_above(error_fd, low);
  if (moved < 0) child_fail("extra", errno, -1);
  error_fd = moved;

  int null_fd = move_above(open_retrying("/dev/null", O_RDONLY, 0), low);
  if (null_fd < 0) child_fail("stdin", errno, -1);
  int output_fd = move_above(open_retrying(r->output, O_WRONLY | O_APPEND | O_CREAT, 0600), low);
  if (output_fd < 0) child_fail("output", errno, -1);

  int *fds = r->fds;
  for (size_t i = 0; i < r->extrac; i++)
    if ((*fds++ = move_above(open_retrying(r->extra[i], O_RDONLY, 0), low)) < 0) child_fail("extra", errno, (long)i);
  for (size_t i = 0; i < r->datac; i++)
    if ((*fds++ = move_above(open_blob(&r->data[i]), low)) < 0) child_fail("data", errno, (long)i);
  for (size_t i = 0; i < r->pinc; i++)
    if ((*fds++ = move_above(open_pinned(&r->pins[i]), low)) < 0) child_fail("pinned", errno, (long)i);

  /* dup2 clears O_CLOEXEC on the target; the sources are all >= low, so none equals its target. */
  if (dup2(null_fd, 0) < 0) child_fail("stdin", errno, -1);
  if (dup2(output_fd, 1) < 0 || dup2(output_fd, 2) < 0) child_fail("output", errno, -1);
  for (size_t slot = 0; slot < slots; slot++) {
    if (dup2(r->fds[slot], 3 + (int)slot) >= 0) continue;
    if (slot < r->extrac) child_fail("extra", errno, (long)slot);
    if (slot < r->extrac + r->datac) child_fail("data", errno, (long)(slot - r->extrac));
    child_fail("pinned", errno, (long)(slot - r->extrac - r->datac));
  }
  close(null_fd);
  close(output_fd);
  for (size_t slot = 0; slot < slots; slot++) close(r->fds[slot]);

  /* 6. cwd, through its pinned descriptor when it is a pinned folder (no path walk to race). */
  int pinned_cwd = -1;
  for (size_t i = 0; i < r->pinc && pinned_cwd < 0; i++)
    if (strcmp(r->pins[i].path, r->cwd) == 0) pinned_cwd = 3 + (int)(r->extrac + r->datac + i);
  if ((pinned_cwd >= 0 ? fchdir(pinned_cwd) : chdir(r->cwd)) != 0) child_fail("chdir", errno, -1);
  if (r->check_cwd) {
    struct stat here;
    if (stat(".", &here) != 0) child_fail("chdir", errno, -1);
    if ((unsigned long long)here.st_dev != r->cwd_dev || (unsigned long long)here.st_ino != r->cwd_ino) child_fail("chdir", ESTALE, -1);
  }

  /* 7. The user, last. From root to another uid the kernel clears every capability (unless
   * keep-caps is set: it is cleared first); a drop that could be undone fails the spawn. */
  if (r->set_user) {
    if (prctl(PR_SET_KEEPCAPS, 0L, 0L, 0L, 0L) != 0) child_fail("user", errno, -1);
    if (setgroups(0, NULL) != 0) child_fail("user", errno, -1);
    if (setgid((gid_t)r->gid) != 0) child_fail("user", errno, -1);
    if (setuid((uid_t)r->uid) != 0) child_fail("user", errno, -1);
    if (r->uid != 0 && setuid(0) == 0) child_fail("user", EPERM, -1);
  }

  /* 8. exec. A file without a slash is searched on the task's own PATH (execvpe reads environ). */
  if (strchr(r->file, '/') == NULL) {
    environ = r->envp;
    execvpe(r->file, r->argv, r->envp);
  } else {
    execve(r->file, r->argv, r->envp);
  }
  child_fail("exec", errno, -1);
}

/* --------------------------------------------------------------- the loop */

static int signal_fd;

static int highest_fd(void) {
  int highest = signal_fd;
  for (size_t i = 0; i < pending_count; i++)
    if (pending[i].fd > highest) highest = pending[i].fd;
  return highest;
}

static void handle_request(char *payload, size_t length) {
  struct request request;
  void *allocation = NULL;
  parse_request(payload, length, &request, &allocation);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    out_printf("failed %s fork %d\n", request.reqid, errno);
    free(allocation);
    return;
  }
  int highest = highest_fd();
  if (pipe_fds[0] > highest) highest = pipe_fds[0];
  if (pipe_fds[1] > highest) highest = pipe_fds[1];

  pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    error_fd = pipe_fds[1];
    run_child(&request, highest);
  }
  int fork_error = errno;
  close(pipe_fds[1]);
  if (pid < 0) {
    close(pipe_fds[0]);
    out_printf("failed %s fork %d\n", request.reqid, fork_error);
    free(allocation);
    return;
  }
  if (pending_count == pending_cap) {
    pending_cap = pending_cap ? pending_cap * 2 : 64;
    pending = xrealloc(pending, pending_cap * sizeof *pending);
  }
  struct pending *entry = &pending[pending_count++];
  entry->pid = pid;
  entry->fd = pipe_fds[0];
  memcpy(entry->reqid, request.reqid, strlen(request.reqid) + 1);
  free(allocation);
}

static char *in_buf;
static size_t in_len, in_cap;

/* Reads what stdin has; returns 0 on EOF. Complete requests are handled as they arrive. */
static int read_requests(void) {
  if (in_cap - in_len < READ_CHUNK) {
    in_cap = in_cap * 2 + READ_CHUNK;
    in_buf = xrealloc(in_buf, in_cap);
  }
  ssize_t n = read(0, in_buf + in_len, in_cap - in_len);
  if (n < 0) return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK ? 1 : 0;
  if (n == 0) return 0;
  in_len += (size_t)n;

  size_t at = 0;
  while (in_len - at >= 4) {
    const unsigned char *header = (const unsigned char *)in_buf + at;
    uint32_t length = (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 | (uint32_t)header[3] << 24;
    if (length == 0 || length > MAX_PAYLOAD) malformed("bad request length %u", (unsigned)length);
    if (in_len - at - 4 < length) {
      /* Incomplete: make sure the whole request will fit. */
      size_t needed = 4 + (size_t)length;
      if (at == 0 && needed > in_cap) {
        in_cap = needed + READ_CHUNK;
        in_buf = xrealloc(in_buf, in_cap);
      }
      break;
    }
    handle_request(in_buf + at + 4, length);
    at += 4 + (size_t)length;
  }
  if (at > 0) {
    memmove(in_buf, in_buf + at, in_len - at);
    in_len -= at;
  }
  return 1;
}

static void close_inherited(void) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  DIR *dir = opendir("/proc/self/fd");
  if (!dir) return;
  int own = dirfd(dir);
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    int fd = atoi(entry->d_name);
    if (fd > 2 && fd != own) close(fd);
  }
  closedir(dir);
}

int main(int argc, char **argv) {
  /* Die with the daemon. If it is already gone, stop now. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc > 1) {
    if (getppid() != (pid_t)atol(argv[1])) return 0;
  } else if (getppid() == 1) {
    return 0;
  }

  close_inherited();
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  signal_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    perror("tend-spawner: signalfd");
    return 3;
  }

  struct pollfd *fds = NULL;
  size_t fds_cap = 0;
  /* After stdin's EOF, spawns already forked still get their started/failed line before the exit. */
  int stdin_open = 1;
  for (;;) {
    out_flush();
    if (!stdin_open && pending_count == 0) return 0;
    if (fds_cap < pending_count + 2) {
      fds_cap = (pending_count + 2) * 2;
      fds = xrealloc(fds, fds_cap * sizeof *fds);
    }
    size_t nfds = 0;
    fds[nfds++] = (struct pollfd){.fd = stdin_open ? 0 : -1, .events = POLLIN};
    fds[nfds++] = (struct pollfd){.fd = signal_fd, .events = POLLIN};
    for (size_t i = 0; i < pending_count; i++)
      if (pending[i].fd >= 0) fds[nfds++] = (struct pollfd){.fd = pending[i].fd, .events = POLLIN};

    if (poll(fds, (nfds_t)nfds, -1) < 0) {
      if (errno == EINTR) continue;
      perror("tend-spawner: poll");
      return 3;
    }
    /* Error pipes first (started/failed), then exits, then new requests. */
    for (size_t i = 2; i < nfds; i++)
      if (fds[i].revents) on_error_pipe_ready(fds[i].fd);
    if (fds[1].revents) {
      struct signalfd_siginfo info[16];
      while (read(signal_fd, info, sizeof info) > 0) {
      }
      reap();
    }
    if (fds[0].revents && !read_requests()) stdin_open = 0;
  }
}
