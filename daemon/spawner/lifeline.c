/*
 * tend-spawner: a keeper's lifeline, for a task that must end with its daemon (a spawn request with
 * the flag SPAWN_LIFELINE, PROTOCOL.md; a task that may be retried elsewhere must never run on here).
 *
 * The lifeline is the keeper's report channel (a socket pair: nothing can open it again through
 * /proc). The helper holds its other end, and nothing else does (every keeper closes what it
 * inherits of the helper's); the helper dies with the daemon (PR_SET_PDEATHSIG SIGKILL), however
 * the daemon ends. So once the helper is gone, crashed or exited, the keeper's end polls POLLHUP:
 * the keeper kills the task at once.
 *
 * "The task" is everything it started: the keeper is made a child subreaper before the fork, so a
 * process the task leaves behind (setsid, a double fork) becomes the keeper's child when its parent
 * dies, not init's. The keeper SIGKILLs the task's process group, then its own children, again and
 * again as more are handed to it, until it has none. A sandboxed task's bubblewrap is the keeper's
 * child like any task: with it goes its pid namespace (--unshare-pid), and the kernel kills
 * everything inside. While the task runs, the keeper reaps the orphans it adopts (SIGCHLD, read
 * through a signalfd), so none of them lingers as a zombie.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spawner.h"

/* Between two rounds of killing what is left; at most END_TREE_MAX_MS in all: a process stuck in
 * the kernel (D state) dies only once it returns, and the exit file must not wait for it forever. */
enum { END_TREE_POLL_MS = 10, END_TREE_MAX_MS = 10000 };

/* How often the lease file is read: a lease is a fraction of the stall interval (seconds). */
enum { LEASE_CHECK_MS = 50 };

int lifeline_begin(struct lifeline *lifeline, int report_fd, int lease_dir) {
  *lifeline = (struct lifeline){.fd = report_fd, .children = -1, .lease_dir = lease_dir};
  if (prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L) != 0) return -1;
  /* Blocked before the fork, so no SIGCHLD is lost; the child empties its mask (child.c). */
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0) return -1;
  lifeline->children = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  return lifeline->children < 0 ? -1 : 0;
}

/* Reaps every child that has ended (the task's status is kept); 0 once the keeper has no child left. */
static int reap(struct lifeline *lifeline) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) return 0;
    if (pid == 0) return 1;
    if (pid == lifeline->task) {
      lifeline->task_status = status;
      lifeline->task_reaped = 1;
    }
  }
}

/* SIGKILLs every child of the keeper: a child cannot be reaped (and its pid reused) meanwhile, but by us. */
static void kill_children(void) {
  proc_signal_children(SIGKILL);
}

long long monotonic_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Whether the lease the daemon last wrote has run out. No file (not written yet), or one that does
 * not hold a number, is no deadline: the lifeline alone then bounds the task. */
static int lease_ran_out(const struct lifeline *lifeline) {
  if (lifeline->lease_dir < 0) return 0;
  /* In the task's folder: a FIFO there must not stop the watch (regular.c). */
  int fd = open_regular(lifeline->lease_dir, "lease", O_RDONLY, 0);
  if (fd < 0) return 0;
  char text[32];
  ssize_t n;
  do n = read(fd, text, sizeof text - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return 0;
  text[n] = 0;
  long long deadline = 0;
  int digits = 0;
  for (const char *at = text; *at >= '0' && *at <= '9' && digits < 18; at++, digits++) deadline = deadline * 10 + (*at - '0');
  return digits > 0 && monotonic_ms() >= deadline;
}

int lifeline_timeout_ms(const struct lifeline *lifeline) {
  return lifeline->lease_dir >= 0 && !lifeline->ending ? LEASE_CHECK_MS : -1;
}

void lifeline_poll_fds(const struct lifeline *lifeline, struct pollfd fds[2]) {
  /* No events asked of the channel: POLLHUP (no peer left) is always reported. */
  fds[0] = (struct pollfd){.fd = lifeline->fd, .events = 0};
  fds[1] = (struct pollfd){.fd = lifeline->children, .events = POLLIN};
}

void lifeline_on_ready(struct lifeline *lifeline, const struct pollfd fds[2]) {
  if (fds[1].revents & POLLIN) {
    drain_signalfd(lifeline->children);
  }
  reap(lifeline);
  if (lifeline->fd >= 0 && (fds[0].revents & (POLLERR | POLLHUP))) {
    lifeline->fd = -1;
    lifeline->ending = 1;
    /* A task that had ended by itself is recorded as it ended; its group may be gone (its id free). */
    if (!lifeline->task_reaped) {
      lifeline->broke = 1;
      kill(-lifeline->task, SIGKILL);
      kill(lifeline->task, SIGKILL);
    }
  }
  if (!lifeline->ending && !lifeline->task_reaped && lease_ran_out(lifeline)) {
    lifeline->ending = 1;
    lifeline->lease_ran_out = 1;
    kill(-lifeline->task, SIGKILL);
    kill(lifeline->task, SIGKILL);
  }
  if (lifeline->ending) kill_children();
}

int lifeline_wait(struct lifeline *lifeline) {
  reap(lifeline);
  while (!lifeline->task_reaped) {
    struct pollfd fds[2];
    lifeline_poll_fds(lifeline, fds);
    /* On a failure (EINTR) revents stay 0: it only reaps, and polls again. */
    poll(fds, 2, lifeline_timeout_ms(lifeline));
    lifeline_on_ready(lifeline, fds);
  }
  return lifeline->task_status;
}

void lifeline_end_tree(struct lifeline *lifeline) {
  long long deadline = monotonic_ms() + END_TREE_MAX_MS;
  for (;;) {
    kill_children();
    if (!reap(lifeline) || monotonic_ms() >= deadline) return;
    struct pollfd chld = {.fd = lifeline->children, .events = POLLIN};
    poll(&chld, 1, END_TREE_POLL_MS);
    drain_signalfd(lifeline->children);
  }
}
