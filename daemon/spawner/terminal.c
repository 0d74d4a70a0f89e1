/*
 * tend-spawner: a terminal task's pseudo-terminal, and its keeper's relay.
 *
 * The keeper holds the terminal's master side; the task gets the other side as its stdin, stdout,
 * stderr and controlling terminal. The keeper is then the only reader of what the task shows: it
 * copies it, raw, into the output file (output.log keeps every byte the terminal gave, as
 * `script` would), so the daemon's JavaScript never touches the stream, and the copy goes on while
 * no daemon runs. What the daemon writes into the task's stdin FIFO is typed into the terminal;
 * "<cols> <rows>\n" lines written into its resize FIFO set the terminal's size, and the kernel
 * sends SIGWINCH to the task's foreground process group.
 *
 * The task has ended when the keeper has reaped it and the terminal is drained: read until EIO (no
 * process holds the terminal any more; the kernel hands over what was still queued first) or, when
 * something the task left behind still holds it, until it has been quiet for DRAIN_QUIET_MS (at
 * most DRAIN_MAX_MS in all). Only then is the exit reported, so output.log is whole by the time
 * anyone hears the task ended.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spawner.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

enum { DRAIN_QUIET_MS = 50, DRAIN_MAX_MS = 1000, NO_PIDFD_POLL_MS = 20 };

int hold_fifo(const char *path) {
  if (mkfifo(path, 0600) != 0 && errno != EEXIST) return -1;
  int fd;
  do fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  struct stat info;
  int error = 0;
  if (fstat(fd, &info) != 0) error = errno;
  else if (!S_ISFIFO(info.st_mode)) error = ENXIO;
  if (!error) return fd;
  close(fd);
  errno = error;
  return -1;
}

int open_terminal(unsigned cols, unsigned rows, int *terminal) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return -1;
  struct winsize size = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  int error = 0, peer = -1;
  if (unlockpt(master) != 0 || ioctl(master, TIOCSWINSZ, &size) != 0) error = errno;
  /* The other side straight from the master (Linux 4.13): no path in /dev/pts to resolve. */
  if (!error && (peer = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) error = errno;
  int flags = error ? -1 : fcntl(master, F_GETFL);
  if (!error && (flags < 0 || fcntl(master, F_SETFL, flags | O_NONBLOCK) != 0)) error = errno;
  if (!error) {
    *terminal = peer;
    return master;
  }
  if (peer >= 0) close(peer);
  close(master);
  errno = error;
  return -1;
}

static long long now_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* 64 KiB per write to the output file: the terminal hands out at most a few KiB per read. */
static char output_buffer[64 * 1024];

/* Bytes the output file refused (a full disk, a read-only or failing file system). */
static unsigned long long output_lost;

unsigned long long output_lost_bytes(void) { return output_lost; }

/* Writes what it can. A refusal drops the rest of this chunk, and the terminal keeps flowing: a
 * task held up on a full disk would hold its terminal, its input and its resizes with it, for as
 * long as nobody frees space. What the disk refused is counted, never silent: the count goes into
 * the exit line and file, and so into the task's record. The file size limit (EFBIG) is the
 * output cap, which stops the task and says so itself: what lies past it is not a loss. */
static void write_output(int fd, const char *bytes, size_t length) {
  for (size_t done = 0; done < length;) {
    ssize_t n = write(fd, bytes + done, length - done);
    if (n > 0) done += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else {
      if (!(n < 0 && errno == EFBIG)) output_lost += length - done;
      return;
    }
  }
}

/* Copies what the terminal has now; 0 once it reads EIO (no process holds its other side). */
static int copy_output(const struct relay *relay, int *copied) {
  size_t used = 0;
  int open = 1;
  for (;;) {
    ssize_t n = read(relay->master, output_buffer + used, sizeof output_buffer - used);
    if (n > 0) {
      used += (size_t)n;
      *copied = 1;
      if (used < sizeof output_buffer) continue;
      write_output(relay->output, output_buffer, used);
      used = 0;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    open = 0; /* EIO, or anything else: nothing more will come */
    break;
  }
  if (used) write_output(relay->output, output_buffer, used);
  return open;
}

/* Input read from the FIFO but not yet taken by the terminal (its input queue full). */
static char input_buffer[4096];
static size_t input_start, input_end;

static void type_input(const struct relay *relay) {
  while (input_start < input_end) {
    ssize_t n = write(relay->master, input_buffer + input_start, input_end - input_start);
    if (n > 0) input_start += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else if (n < 0 && errno == EAGAIN) return;
    else break; /* the terminal is gone: nobody reads this any more */
  }
  input_start = input_end = 0;
}

static void read_input(const struct relay *relay) {
  ssize_t n;
  do n = read(relay->input, input_buffer, sizeof input_buffer);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return;
  input_start = 0;
  input_end = (size_t)n;
  type_input(relay);
}

/* Applies every whole "<cols> <rows>\n" line that arrived (each is written at once, well under
 * PIPE_BUF, so a read never splits one); anything else is skipped. */
static void apply_resizes(const struct relay *relay) {
  char text[512];
  ssize_t n;
  do n = read(relay->resize, text, sizeof text - 1);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return;
  text[n] = 0;
  for (char *line = text; *line;) {
    char *end = strchr(line, '\n');
    if (!end) break;
    *end = 0;
    char *after_cols = line, *after_rows = line;
    unsigned long cols = strtoul(line, &after_cols, 10);
    unsigned long rows = after_cols != line && *after_cols == ' ' ? strtoul(after_cols + 1, &after_rows, 10) : 0;
    if (cols >= 1 && cols <= 65535 && rows >= 1 && rows <= 65535 && *after_rows == 0) {
      struct winsize size = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
      ioctl(relay->master, TIOCSWINSZ, &size);
    }
    line = end + 1;
  }
}

int relay_terminal(const struct relay *relay, pid_t task, struct lifeline *lifeline, int orphans) {
  /* With a lifeline, the task is reaped through it (SIGCHLD: it reaps the orphans it adopts too). */
  int pidfd = lifeline ? -1 : (int)syscall(SYS_pidfd_open, task, 0);
  int status = 0, reaped = 0, open = 1;
  long long reaped_at = 0;
  for (;;) {
    int pending = input_start < input_end;
    struct pollfd fds[6] = {
        {.fd = open ? relay->master : -1, .events = (short)(POLLIN | (pending ? POLLOUT : 0))},
        {.fd = open && !pending ? relay->input : -1, .events = POLLIN},
        {.fd = open ? relay->resize : -1, .events = POLLIN},
        {.fd = reaped ? -1 : pidfd, .events = POLLIN},
        {.fd = -1},
        {.fd = -1},
    };
    if (lifeline) lifeline_poll_fds(lifeline, fds + 4);
    else if (orphans >= 0 && !reaped) fds[4] = (struct pollfd){.fd = orphans, .events = POLLIN};
    int timeout = reaped ? DRAIN_QUIET_MS : pidfd < 0 && !lifeline ? NO_PIDFD_POLL_MS : lifeline ? lifeline_timeout_ms(lifeline) : -1;
    int ready = poll(fds, 6, timeout);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) ready = 0; /* cannot happen with these descriptors; treated as quiet */
    int copied = 0;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) open = copy_output(relay, &copied);
    if (open && (fds[0].revents & POLLOUT)) type_input(relay);
    if (fds[1].revents & POLLIN) read_input(relay);
    if (fds[2].revents & POLLIN) apply_resizes(relay);
    if (lifeline) {
      lifeline_on_ready(lifeline, fds + 4);
      if (!reaped && lifeline->task_reaped) {
        status = lifeline->task_status;
        reaped = 1;
        reaped_at = now_ms();
      }
    } else if (!reaped && (pidfd < 0 || fds[3].revents || fds[4].revents)) {
      /* A subreaper (orphans >= 0) reaps the orphans it adopted as they end, and keeps the task's status. */
      if (orphans >= 0) drain_signalfd(orphans);
      for (;;) {
        int any;
        pid_t pid = waitpid(orphans >= 0 ? -1 : task, &any, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid == task || (pid < 0 && errno == ECHILD)) {
          if (pid == task) status = any;
          reaped = 1;
          reaped_at = now_ms();
        }
        if (pid <= 0 || pid == task) break;
      }
    }
    if (!reaped) continue;
    if (!open || (ready == 0 && !copied) || now_ms() - reaped_at >= DRAIN_MAX_MS) break;
  }
  if (pidfd >= 0) close(pidfd);
  return status;
}
