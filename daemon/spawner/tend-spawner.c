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
 *   reqid, file, cwd, outputFile, openFiles, fileSizeBytes, argc, argv[0..argc-1],
 *   envc, env[...] ("K=V"), extrac, extraFiles[...], cgc, cgroupProcs[...]
 * (numbers in decimal; reqid is 1..63 printable characters without spaces).
 *
 * Replies (stdout), one line each, space-separated:
 *   started <reqid> <pid>                    the child has exec'd
 *   failed <reqid> <stage> <errno> [<index>] nothing is left running; stage is one of output,
 *                                            stdin, extra, cgroup, limits, setsid, chdir, exec,
 *                                            fork. EXTENSION to the original protocol: for the
 *                                            stages `extra` and `cgroup` a 5th field gives the
 *                                            0-based index of the file that failed (in extraFiles
 *                                            or cgroupProcs), so the daemon can name the path.
 *   exited <pid> <code> <signal>             code is -1 when a signal ended it, signal 0 when it
 *                                            exited. Always after the `started` of that pid; the
 *                                            exits of children that failed are never reported.
 *   error <message>                          malformed request; the helper then exits 2.
 * On stdin EOF the helper reports the spawns it already forked, then exits 0 without touching its
 * children.
 *
 * Child setup, in order: signal dispositions to SIG_DFL and an empty mask; setsid(); limits
 * (RLIMIT_CORE 0, RLIMIT_NOFILE and RLIMIT_FSIZE soft = hard = the request's); the pid written to
 * each cgroupProcs file; stdin /dev/null, stdout and stderr one O_APPEND description of outputFile
 * (created 0600), extra files read-only on fd 3, 4, ...; every other descriptor closed; chdir(cwd);
 * execve(file, argv, env); a file without a slash is searched on the PATH of env (execvpe). A failing step writes "<stage> <errno>[ <index>]"
 * to an O_CLOEXEC pipe and _exits; EOF with no data on that pipe means the exec succeeded.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
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

struct request {
  const char *reqid, *file, *cwd, *output;
  unsigned long long open_files, file_size;
  size_t argc, envc, extrac, cgc;
  char **argv, **envp, **extra, **cgroups;
  int *extra_fds;
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

static unsigned long long next_number(struct cursor *cursor, const char *what, unsigned long long max) {
  const char *text = next_string(cursor, what);
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

/* A count of strings: each takes at least one byte, so it cannot exceed what is left. */
static size_t next_count(struct cursor *cursor, const char *what) {
  return (size_t)next_number(cursor, what, (unsigned long long)(cursor->end - cursor->at));
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

  /* The counts come before their strings: parse in two passes into one allocation. */
  struct cursor scan = cursor;
  size_t argc = next_count(&scan, "argc");
  for (size_t i = 0; i < argc; i++) next_string(&scan, "argv");
  size_t envc = next_count(&scan, "envc");
  for (size_t i = 0; i < envc; i++) next_string(&scan, "env");
  size_t extrac = next_count(&scan, "extrac");
  for (size_t i = 0; i < extrac; i++) next_string(&scan, "extraFiles");
  size_t cgc = next_count(&scan, "cgc");
  for (size_t i = 0; i < cgc; i++) next_string(&scan, "cgroupProcs");
  if (scan.at != scan.end) malformed("request has %zu trailing bytes", (size_t)(scan.end - scan.at));
  if (extrac > 1024) malformed("too many extra files");

  size_t pointers = (argc + 1) + (envc + 1) + extrac + cgc;
  char **table = xrealloc(NULL, pointers * sizeof(char *) + extrac * sizeof(int) + 1);
  *allocation = table;
  request->argc = argc;
  request->envc = envc;
  request->extrac = extrac;
  request->cgc = cgc;
  request->argv = table;
  request->envp = request->argv + argc + 1;
  request->extra = request->envp + envc + 1;
  request->cgroups = request->extra + extrac;
  request->extra_fds = (int *)(void *)(request->cgroups + cgc);

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
  if (fd >= low) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, low);
  if (moved < 0) return -1;
  close(fd);
  return moved;
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
    int fd;
    do fd = open(r->cgroups[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) child_fail("cgroup", errno, (long)i);
    ssize_t written;
    do written = write(fd, pid_text, (size_t)pid_length);
    while (written < 0 && errno == EINTR);
    if (written < 0) child_fail("cgroup", errno, (long)i);
    if (written != pid_length) child_fail("cgroup", EIO, (long)i);
    close(fd);
  }

  /* 5. Descriptors: open everything above the target range 0 .. 3+extrac-1, then dup2 down. */
  int low = 3 + (int)r->extrac;
  int moved = move_above(error_fd, low);
  if (moved < 0) child_fail("extra", errno, -1);
  error_fd = moved;

  int null_fd;
  do null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
  while (null_fd < 0 && errno == EINTR);
  if (null_fd < 0 || (null_fd = move_above(null_fd, low)) < 0) child_fail("stdin", errno, -1);

  int output_fd;
  do output_fd = open(r->output, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
  while (output_fd < 0 && errno == EINTR);
  if (output_fd < 0 || (output_fd = move_above(output_fd, low)) < 0) child_fail("output", errno, -1);

  for (size_t i = 0; i < r->extrac; i++) {
    int fd;
    do fd = open(r->extra[i], O_RDONLY | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0 || (fd = move_above(fd, low)) < 0) child_fail("extra", errno, (long)i);
    r->extra_fds[i] = fd;
  }

  /* dup2 clears O_CLOEXEC on the target; the sources are all >= low, so none equals its target. */
  if (dup2(null_fd, 0) < 0) child_fail("stdin", errno, -1);
  if (dup2(output_fd, 1) < 0 || dup2(output_fd, 2) < 0) child_fail("output", errno, -1);
  for (size_t i = 0; i < r->extrac; i++)
    if (dup2(r->extra_fds[i], 3 + (int)i) < 0) child_fail("extra", errno, (long)i);
  close(null_fd);
  close(output_fd);
  for (size_t i = 0; i < r->extrac; i++) close(r->extra_fds[i]);

  /* 6. cwd. */
  if (chdir(r->cwd) != 0) child_fail("chdir", errno, -1);

  /* 7. exec. A file without a slash is searched on the task's own PATH (execvpe reads environ). */
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
