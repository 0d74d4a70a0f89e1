/*
 * tend-spawner: the daemon's native spawner. A tiny long-lived helper that the daemon starts once
 * (daemon/spawn/native-spawner.ts) and sends requests to over its stdin. For every task it forks a
 * keeper (keeper.c) from its own small address space (cheap, unlike forking the ~100 MiB daemon);
 * the keeper forks the task child (child.c), becomes its parent, relays how the start went, and
 * outlives the helper and the daemon (unless its task is to end with them: lifeline.c): when the
 * task ends it writes the exit status into the task's exit file, tells the helper if one still
 * listens, and exits. The helper reaps its keepers and reports on stdout; a later helper can attach to
 * a keeper it did not fork (a pidfd). Single-threaded: poll() on stdin, on a signalfd for SIGCHLD,
 * on every keeper's report channel (a socket pair) and on the pidfd of every keeper it attached to.
 *
 * Usage: tend-spawner [<parent-pid>]   (with the pid, the helper exits at once if its parent is
 * already gone; in any case it gets SIGKILL when its parent dies. Its keepers do not.)
 *
 * The wire protocol, the keeper's report lines, the exit file and what a spawn sets up, in order:
 * PROTOCOL.md.
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spawner.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define READ_CHUNK (64u * 1024u)

/* ---------------------------------------------------------------- output */

static char *out_buf;
static size_t out_len, out_cap;

void drain_signalfd(int fd) {
  struct signalfd_siginfo info[16];
  for (;;) {
    ssize_t n = read(fd, info, sizeof info);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
  }
}

void out_printf(const char *format, ...) {
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

void malformed(const char *format, ...) {
  char message[256];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  out_printf("error %s\n", message);
  out_flush();
  exit(2);
}

/* --------------------------------------------------------------- keepers */

enum keeper_state {
  STARTING, /* forked, its child's start not reported yet */
  RUNNING,  /* started (or attached): its exit not reported yet */
  DONE,     /* its last line (failed or exited) is out: only its reaping is left */
};

/* A keeper this helper forked (its child: reaped on SIGCHLD, fd the read end of its report
 * pipe) or attached to (fd its pidfd, readable once it has exited). fd is -1 once closed. */
struct keeper {
  pid_t pid, task;
  int fd;
  int attached;
  enum keeper_state state;
  char reqid[MAX_REQID + 1];
};

static struct keeper *keepers;
static size_t keeper_count, keeper_cap;
/* keeper index + 1 by descriptor (0: none), so a ready descriptor finds its keeper at once. */
static size_t *index_by_fd;
static size_t index_by_fd_cap;
static struct pollfd *poll_fds;
static size_t poll_cap;
static char *in_buf;
static size_t in_len, in_cap;
static int signal_fd;
static long page_size = 4096;

static void map_fd(int fd, size_t slot) {
  if (fd < 0) return;
  if ((size_t)fd >= index_by_fd_cap) {
    size_t grown = ((size_t)fd + 1) * 2;
    index_by_fd = xrealloc(index_by_fd, grown * sizeof *index_by_fd);
    memset(index_by_fd + index_by_fd_cap, 0, (grown - index_by_fd_cap) * sizeof *index_by_fd);
    index_by_fd_cap = grown;
  }
  index_by_fd[fd] = slot;
}

static ssize_t find_by_fd(int fd) {
  if (fd < 0 || (size_t)fd >= index_by_fd_cap || index_by_fd[fd] == 0) return -1;
  return (ssize_t)index_by_fd[fd] - 1;
}

static ssize_t find_forked(pid_t pid) {
  for (size_t i = 0; i < keeper_count; i++)
    if (keepers[i].pid == pid && !keepers[i].attached) return (ssize_t)i;
  return -1;
}

static struct keeper *add_keeper(pid_t pid, int fd, int attached, const char *reqid) {
  if (keeper_count == keeper_cap) {
    keeper_cap = keeper_cap ? keeper_cap * 2 : 64;
    keepers = xrealloc(keepers, keeper_cap * sizeof *keepers);
  }
  struct keeper *keeper = &keepers[keeper_count++];
  memset(keeper, 0, sizeof *keeper);
  keeper->pid = pid;
  keeper->fd = fd;
  keeper->attached = attached;
  keeper->state = STARTING;
  memcpy(keeper->reqid, reqid, strlen(reqid) + 1);
  map_fd(fd, keeper_count);
  return keeper;
}

static void close_keeper_fd(struct keeper *keeper) {
  if (keeper->fd < 0) return;
  map_fd(keeper->fd, 0);
  close(keeper->fd);
  keeper->fd = -1;
}

static void remove_keeper(size_t index) {
  close_keeper_fd(&keepers[index]);
  keepers[index] = keepers[--keeper_count];
  if (index < keeper_count) map_fd(keepers[index].fd, index + 1);
}

static int highest_fd(void) {
  int highest = signal_fd;
  for (size_t i = 0; i < keeper_count; i++)
    if (keepers[i].fd > highest) highest = keepers[i].fd;
  return highest;
}

static void drop_pages(void *start, size_t length) {
  if (!start) return;
  uintptr_t page = (uintptr_t)page_size;
  uintptr_t from = ((uintptr_t)start + page - 1) & ~(page - 1);
  uintptr_t to = ((uintptr_t)start + length) & ~(page - 1);
  if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);
}

void release_helper_memory(void) {
  drop_pages(in_buf, in_cap);
  drop_pages(out_buf, out_cap);
  drop_pages(keepers, keeper_cap * sizeof *keepers);
  drop_pages(index_by_fd, index_by_fd_cap * sizeof *index_by_fd);
  drop_pages(poll_fds, poll_cap * sizeof *poll_fds);
}

static void report_exit(struct keeper *keeper, int code, int signal_number, int ended_by, unsigned long long lost) {
  out_printf("exited %d %d %d%s%s\n", (int)keeper->task, code, signal_number, ended_by_word(ended_by), lost_word(lost));
  keeper->state = DONE;
}

/* The keeper is gone without a word about the exit: its exit file, the daemon's to read, says. */
static void report_gone(struct keeper *keeper) {
  out_printf("gone %d\n", (int)keeper->task);
  keeper->state = DONE;
}

static void on_report_line(struct keeper *keeper, char *line) {
  char kind = line[0];
  const char *rest = line[0] && line[1] == ' ' ? line + 2 : "";
  if (kind == 's' && keeper->state == STARTING) {
    int task;
    unsigned long long start;
    if (sscanf(rest, "%d %llu", &task, &start) != 2) return;
    keeper->task = (pid_t)task;
    keeper->state = RUNNING;
    out_printf("started %s %d %d %llu\n", keeper->reqid, task, (int)keeper->pid, start);
  } else if (kind == 'f' && keeper->state == STARTING) {
    /* "<stage> <errno>[ <index>]" (cleaned by the keeper), or the keeper's own "setup ..." line. */
    out_printf("failed %s %s\n", keeper->reqid, *rest ? rest : "exec 5");
    keeper->state = DONE;
  } else if (kind == 'x' && keeper->state == RUNNING) {
    int code, signal_number, ended_by = ENDED_BY_ITSELF;
    unsigned long long lost = 0;
    char words[2][32] = {"", ""};
    int fields = sscanf(rest, "%d %d %31s %31s", &code, &signal_number, words[0], words[1]);
    if (fields < 2) return;
    for (int i = 0; i < fields - 2; i++) {
      if (strcmp(words[i], "lease") == 0) ended_by = ENDED_BY_LEASE;
      else if (strncmp(words[i], "lost=", 5) == 0) lost = strtoull(words[i] + 5, NULL, 10);
    }
    report_exit(keeper, code, signal_number, ended_by, lost);
  }
}

/* Reads what a forked keeper's report channel holds (non-blocking). Every line is one write of at
 * most a few hundred bytes, atomic, and a keeper writes three at most: a read never splits one.
 * Returns 1 if the pipe may say more. */
static int read_report(size_t index) {
  struct keeper *keeper = &keepers[index];
  char data[512];
  ssize_t n;
  do n = read(keeper->fd, data, sizeof data - 1);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (n <= 0) {
    close_keeper_fd(keeper); /* EOF: only its reaping is left */
    return 0;
  }
  data[n] = 0;
  for (char *line = data, *end; *line; line = end + 1) {
    end = strchr(line, '\n');
    if (!end) break;
    *end = 0;
    on_report_line(keeper, line);
  }
  /* Held after its last line until its EOF: a keeper outliving its task's end (leftovers.c) learns
   * that the helper is gone when its end of the channel hangs up, not before. */
  return keeper->fd >= 0 && keeper->state != DONE;
}

static void on_keeper_fd_ready(int fd) {
  ssize_t index = find_by_fd(fd);
  if (index < 0) return;
  struct keeper *keeper = &keepers[index];
  if (!keeper->attached) {
    read_report((size_t)index);
    return;
  }
  /* An attached keeper's pidfd: it has exited. */
  report_gone(keeper);
  remove_keeper((size_t)index);
}

/*
 * Reaps what ended, and continues a keeper stopped before it reported its start: a keeper never
 * stops itself, and one that something else stopped (its own task can: they share a uid under
 * sandbox off) would hold the launch, and the kill that waits for it, before the daemon even knows
 * its pid. It is our unreaped child, so its pid is still it: SIGCONT reaches that keeper and no
 * other process. A started keeper is the daemon's to continue (once it waits for an answer).
 */
static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    ssize_t index = find_forked(pid);
    if (index < 0) continue;
    if (WIFSTOPPED(status)) {
      if (keepers[index].state == STARTING) kill(pid, SIGCONT);
      continue;
    }
    /* Whatever it said before it died is in its pipe now. */
    while (keepers[index].fd >= 0 && read_report((size_t)index)) {
    }
    struct keeper *keeper = &keepers[index];
    if (keeper->state == STARTING) out_printf("failed %s keeper %d\n", keeper->reqid, ECHILD);
    else if (keeper->state == RUNNING) report_gone(keeper);
    remove_keeper((size_t)index);
  }
}

/* ---------------------------------------------------------------- requests */

static void handle_spawn(struct request *request) {
  size_t failed_index = 0;
  if (idmap_prepare(request, &failed_index) != 0) {
    out_printf("failed %s idmap %d %zu\n", request->reqid, errno, failed_index);
    return;
  }
  /* A socket pair, not a pipe: a pipe end can be opened again through /proc/<pid>/fd by any process
   * of the helper's or the keeper's uid (an `off` task), which could then write the keeper's report
   * (a task's exit) or hold the lifeline open; a socket cannot be opened so (ENXIO). */
  int report[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, report) != 0) {
    out_printf("failed %s fork %d\n", request->reqid, errno);
    return;
  }
  int highest = highest_fd();
  if (report[0] > highest) highest = report[0];
  if (report[1] > highest) highest = report[1];
  for (size_t i = 0; i < request->usernsc; i++)
    if (request->userns_fds[i] > highest) highest = request->userns_fds[i];

  pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    /* The keeper's writes block: its lines are tiny, but a full pipe must not lose one. */
    fcntl(report[1], F_SETFL, 0);
    run_keeper(request, report[1], highest);
  }
  int fork_error = errno;
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    out_printf("failed %s fork %d\n", request->reqid, fork_error);
    return;
  }
  add_keeper(pid, report[0], 0, request->reqid);
}

/* Whether the process behind a pidfd has exited (a pidfd polls readable from then on). */
static int has_exited(int pidfd) {
  struct pollfd ready = {.fd = pidfd, .events = POLLIN};
  int n;
  do n = poll(&ready, 1, 0);
  while (n < 0 && errno == EINTR);
  return n > 0;
}

static void handle_attach(const struct attach *attach) {
  int error = 0;
  int pidfd = (int)syscall(SYS_pidfd_open, attach->keeper, 0);
  if (pidfd < 0) {
    error = errno == EINVAL ? ESRCH : errno;
  } else {
    /* The pidfd pins the process: if /proc/<pid> still shows the start time, it is that keeper. */
    unsigned long long start = 0;
    int stat_error = proc_start_time(attach->keeper, &start);
    if (stat_error || start != attach->keeper_start) {
      close(pidfd);
      pidfd = -1;
      error = stat_error == 0 || stat_error == ENOENT ? ESRCH : stat_error;
    } else if (has_exited(pidfd)) {
      /* A zombie (killed, not reaped yet by whoever inherited it) is no keeper: it keeps its pid and
       * start time, but will record nothing more. Said now, so that a recovering daemon knows. */
      close(pidfd);
      pidfd = -1;
      error = ESRCH;
    }
  }
  if (pidfd < 0) {
    out_printf("failed %s attach %d\n", attach->reqid, error);
    return;
  }
  struct keeper *keeper = add_keeper(attach->keeper, pidfd, 1, attach->reqid);
  keeper->task = attach->task;
  keeper->state = RUNNING;
  out_printf("attached %s\n", attach->reqid);
}

static void handle_request(char *payload, size_t length) {
  /* "ping\0<id>\0": answered "pong <id>" at once, so the daemon can tell a helper that answers
   * (however long its keepers take) from one that is stopped or wedged. */
  if (length > 5 && memcmp(payload, "ping", 5) == 0 && payload[length - 1] == 0) {
    const char *id = payload + 5;
    size_t id_length = strlen(id);
    if (id_length == 0 || id_length > MAX_REQID || id + id_length + 1 != payload + length) malformed("bad ping");
    out_printf("pong %s\n", id);
    return;
  }
  struct request spawn;
  struct attach attach;
  void *allocation = NULL;
  if (parse_request(payload, length, &spawn, &attach, &allocation) == REQUEST_ATTACH) handle_attach(&attach);
  else handle_spawn(&spawn);
  free(allocation);
}

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

/* --------------------------------------------------------------- the loop */

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

static size_t starting_count(void) {
  size_t count = 0;
  for (size_t i = 0; i < keeper_count; i++)
    if (keepers[i].state == STARTING) count++;
  return count;
}

int main(int argc, char **argv) {
  /* Die with the daemon. If it is already gone, stop now. (Keepers clear this: fork does.) */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc > 1) {
    if (getppid() != (pid_t)atol(argv[1])) return 0;
  } else if (getppid() == 1) {
    return 0;
  }

  long size = sysconf(_SC_PAGESIZE);
  if (size > 0) page_size = size;
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

  /* After stdin's EOF, spawns already forked still get their started/failed line before the exit. */
  int stdin_open = 1;
  for (;;) {
    out_flush();
    if (!stdin_open && starting_count() == 0) return 0;
    if (poll_cap < keeper_count + 2) {
      poll_cap = (keeper_count + 2) * 2;
      poll_fds = xrealloc(poll_fds, poll_cap * sizeof *poll_fds);
    }
    size_t nfds = 0;
    poll_fds[nfds++] = (struct pollfd){.fd = stdin_open ? 0 : -1, .events = POLLIN};
    poll_fds[nfds++] = (struct pollfd){.fd = signal_fd, .events = POLLIN};
    for (size_t i = 0; i < keeper_count; i++)
      if (keepers[i].fd >= 0) poll_fds[nfds++] = (struct pollfd){.fd = keepers[i].fd, .events = POLLIN};

    if (poll(poll_fds, (nfds_t)nfds, -1) < 0) {
      if (errno == EINTR) continue;
      perror("tend-spawner: poll");
      return 3;
    }
    /* Report pipes and pidfds first (started/failed/exited), then reaping, then new requests. */
    for (size_t i = 2; i < nfds; i++)
      if (poll_fds[i].revents) on_keeper_fd_ready(poll_fds[i].fd);
    if (poll_fds[1].revents) {
      drain_signalfd(signal_fd);
      reap();
    }
    if (poll_fds[0].revents && !read_requests()) stdin_open = 0;
  }
}
